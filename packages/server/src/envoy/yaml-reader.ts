// Reads one YAML config file into plain values that remember their line, and refuses what is not config.

import { ERROR_CODES, SluiceError } from 'sluice';
import type { Node } from 'yaml';
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';

/**
 * A config file that cannot be loaded: the file, the line, and the reason, in one line an operator
 * can act on (`ratelimit/api.yaml:7: invalid rate limit unit 'foo'`).
 */
export class EnvoyConfigError extends SluiceError {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly reason: string,
  ) {
    super(ERROR_CODES.INVALID_OPTION, `${file}:${line}: ${reason}`);
  }
}

/** A mapping read from YAML: its entries by key, each with the line it starts on. */
export interface YamlMap {
  readonly line: number;
  readonly entries: ReadonlyMap<string, YamlValue>;
  /**
   * The first key that is not a string, kept under its text: refused in config, taken as written
   * in `metadata`, whose keys are free (as the reference reads them).
   */
  readonly nonStringKey?: { readonly line: number; readonly shown: string };
}

/** A value read from YAML, with its line. Scalars keep their text as written, as the reference reads strings. */
export type YamlValue =
  | { readonly kind: 'map'; readonly line: number; readonly map: YamlMap; readonly keyLine: number }
  | {
      readonly kind: 'list';
      readonly line: number;
      readonly items: readonly YamlValue[];
      readonly keyLine: number;
    }
  | {
      readonly kind: 'scalar';
      readonly line: number;
      readonly value: unknown;
      readonly text: string;
      readonly keyLine: number;
    };

/** Parses a file (YAML 1.1, as the reference's parser reads it) into YamlValues; throws EnvoyConfigError. */
export function readYaml(file: string, source: string): YamlValue | undefined {
  const lines = new LineCounter();
  const document = parseDocument(source, { lineCounter: lines, version: '1.1', merge: true });
  const error = document.errors[0];
  if (error !== undefined) {
    const where = error.linePos?.[0]?.line ?? 1;
    throw new EnvoyConfigError(
      file,
      where,
      `error loading config file: ${error.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '')}`,
    );
  }
  const lineOf = (node: Node | null | undefined, fallback: number): number =>
    node?.range === undefined || node.range === null ? fallback : lines.linePos(node.range[0]).line;

  const convert = (node: unknown, fallback: number, keyLine: number): YamlValue => {
    const line = lineOf(node as Node | undefined, fallback);
    if (isMap(node)) {
      const entries = new Map<string, YamlValue>();
      let nonStringKey: YamlMap['nonStringKey'];
      for (const pair of node.items) {
        const key = pair.key;
        const at = lineOf(key as Node, line);
        let name: string;
        if (isScalar(key) && typeof key.value === 'string') name = key.value;
        else {
          name = isScalar(key) ? String(key.source ?? key.value) : 'a collection';
          nonStringKey ??= { line: at, shown: name };
        }
        entries.set(name, convert(pair.value, at, at));
      }
      const map: YamlMap = nonStringKey === undefined ? { line, entries } : { line, entries, nonStringKey };
      return { kind: 'map', line, map, keyLine };
    }
    if (isSeq(node)) {
      return { kind: 'list', line, items: node.items.map((item) => convert(item, line, line)), keyLine };
    }
    if (isScalar(node)) {
      const text =
        typeof node.value === 'string'
          ? node.value
          : node.value === null
            ? ''
            : String(node.source ?? node.value);
      return { kind: 'scalar', line, value: node.value, text, keyLine };
    }
    // `key:` with nothing after it: a null, as the reference reads it.
    return { kind: 'scalar', line: fallback, value: null, text: '', keyLine };
  };
  if (document.contents === null) return undefined;
  return convert(document.contents, 1, 1);
}

/** Describes a YAML value for a message, as the reference prints list items. */
export function shown(value: YamlValue): string {
  if (value.kind === 'scalar') return value.text;
  return value.kind === 'list' ? 'a list' : 'a map';
}
