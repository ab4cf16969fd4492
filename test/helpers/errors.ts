// Predicates for assert.throws / assert.rejects: the error is a SluiceError with a given stable code.
import { SluiceError } from '../../src/index.js';

/** Matches a SluiceError whose `code` is `code` (and whose message matches `message`, when given). */
export function isCode(code: string, message?: RegExp): (error: unknown) => boolean {
  return (error: unknown) =>
    error instanceof SluiceError &&
    error.code === code &&
    (message === undefined || message.test(error.message));
}
