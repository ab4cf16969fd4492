// Every operation a limiter asks of a store: the registry of src/operations/, one module per operation.
export * from './operations/index.js';
