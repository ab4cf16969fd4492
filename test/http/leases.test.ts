// Concurrency limits through every framework adapter built without decorators (NestJS has its own suite).
import { LEASE_APPS } from '../helpers/http/lease-apps.js';
import { leaseConformance } from '../helpers/http/lease-conformance.js';

for (const [framework, build] of LEASE_APPS) leaseConformance(framework, build);
