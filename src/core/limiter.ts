// What createLimiter() returns: a limiter whose methods run its Pipeline, and the way back from one to the other.
import { type OperationMethods, operationMethods } from '../operations.js';
import type { Limiter, Policy, Store } from '../types.js';
import type { Pipeline } from './pipeline.js';
import { reserve } from './reservation.js';
import { StoredOverrides } from './stored.js';
import { waitFor } from './waiting.js';

let pipelineOf: (limiter: unknown) => Pipeline | undefined;

/**
 * A limiter made by createLimiter(): the face of one Pipeline. Its methods are its own properties,
 * so that code which only calls them may be handed a plain object made with `{ ...limiter, limit }`;
 * all(), the HTTP middleware and the login guard decide through the pipeline itself, and take only
 * the limiter createLimiter() returned (a copy's methods would be passed by).
 */
// The operations' methods, assigned in the constructor.
export interface RateLimiter extends OperationMethods {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: operationMethods() assigns the interface's methods in the constructor.
export class RateLimiter implements Limiter {
  readonly #pipeline: Pipeline;
  readonly name: string;
  readonly policy: Policy;
  readonly store: Store;
  readonly wait: Limiter['wait'];
  readonly reserve: Limiter['reserve'];
  readonly reset: Limiter['reset'];
  readonly setLimit: Limiter['setLimit'];
  readonly getLimit: Limiter['getLimit'];
  readonly clearLimit: Limiter['clearLimit'];
  readonly listLimits: Limiter['listLimits'];
  readonly deny: Limiter['deny'];
  readonly undeny: Limiter['undeny'];
  readonly listDenials: Limiter['listDenials'];

  static {
    pipelineOf = (limiter) =>
      typeof limiter === 'object' && limiter !== null && #pipeline in limiter ? limiter.#pipeline : undefined;
  }

  constructor(pipeline: Pipeline) {
    this.#pipeline = pipeline;
    this.name = pipeline.name;
    this.policy = pipeline.policy;
    this.store = pipeline.store;
    // The methods that are one operation each come from their operation's module (src/operations/).
    Object.assign(this, operationMethods(pipeline));
    this.wait = (identifier, options) => waitFor(pipeline, identifier, options);
    this.reserve = (identifier, options) => reserve(pipeline, identifier, options?.cost ?? 1, options);
    this.reset = (identifier, options) => pipeline.reset(identifier, options?.tag);
    const stored = new StoredOverrides(pipeline);
    this.setLimit = (identifier, limit, options) => stored.setLimit(identifier, limit, options);
    this.getLimit = (identifier, options) => stored.getLimit(identifier, options);
    this.clearLimit = (identifier, options) => stored.clearLimit(identifier, options);
    this.listLimits = () => stored.listLimits();
    this.deny = (identifier, options) => stored.deny(identifier, options);
    this.undeny = (identifier, options) => stored.undeny(identifier, options);
    this.listDenials = () => stored.listDenials();
  }
}

/** The pipeline behind a limiter made by createLimiter(), or undefined for any other value. */
export function limiterPipeline(limiter: unknown): Pipeline | undefined {
  return pipelineOf(limiter);
}
