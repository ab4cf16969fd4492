// A real Nest application on Express and on Fastify, called over HTTP: the behaviour every adapter shows.
import { conformance } from '../../helpers/http/conformance.js';
import { buildNest, PLATFORMS } from '../../helpers/http/nestjs.js';

for (const platform of PLATFORMS) conformance(`nestjs (${platform})`, buildNest(platform));
