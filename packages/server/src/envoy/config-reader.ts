// Reads one config file's YAML values as the reference does: typed fields, its messages, the line of each refusal.
import { EnvoyConfigError, shown, type YamlMap, type YamlValue } from './yaml-reader.js';

/** Typed reads of one file's values; every refusal names the file and the line. */
export class FileReader {
  constructor(readonly file: string) {}

  fail(line: number, reason: string): never {
    throw new EnvoyConfigError(this.file, line, reason);
  }

  /** Refuses the first key that is not a string, outside `metadata` (whose keys are free), as the reference does first. */
  refuseNonStringKeys(value: YamlValue | undefined): void {
    if (value?.kind === 'list') for (const item of value.items) this.refuseNonStringKeys(item);
    if (value?.kind !== 'map') return;
    const bad = value.map.nonStringKey;
    if (bad !== undefined) this.fail(bad.line, `config error, key is not of type string: ${bad.shown}`);
    for (const [key, entry] of value.map.entries) if (key !== 'metadata') this.refuseNonStringKeys(entry);
  }

  map(value: YamlValue | undefined, line: number, known: readonly string[], what: string): YamlMap {
    if (value === undefined || (value.kind === 'scalar' && value.value === null))
      return { line, entries: new Map() };
    if (value.kind !== 'map')
      this.fail(value.line, `config error, expected ${what} to be a map, got ${shown(value)}`);
    for (const [key, entry] of value.map.entries) {
      if (!known.includes(key)) this.fail(entry.keyLine, `config error, unknown key '${key}'`);
    }
    return value.map;
  }

  list(value: YamlValue | undefined): readonly YamlValue[] {
    if (value === undefined || (value.kind === 'scalar' && value.value === null)) return [];
    if (value.kind !== 'list') this.fail(value.line, `config error, expected a list, got ${shown(value)}`);
    for (const item of value.items) {
      if (item.kind !== 'map') {
        this.fail(item.line, `config error, yaml file contains list of type other than map: ${shown(item)}`);
      }
    }
    return value.items;
  }

  text(map: YamlMap, key: string): string {
    const value = map.entries.get(key);
    if (value === undefined) return '';
    if (value.kind !== 'scalar')
      this.fail(value.line, `config error, expected '${key}' to be a string, got ${shown(value)}`);
    return value.text;
  }

  flag(map: YamlMap, key: string): boolean {
    const value = map.entries.get(key);
    if (value === undefined || (value.kind === 'scalar' && value.value === null)) return false;
    if (value.kind !== 'scalar' || typeof value.value !== 'boolean') {
      this.fail(value.line, `config error, expected '${key}' to be true or false, got ${shown(value)}`);
    }
    return value.value;
  }

  integer(map: YamlMap, key: string, max: number): number | undefined {
    const value = map.entries.get(key);
    if (value === undefined || (value.kind === 'scalar' && value.value === null)) return undefined;
    const number = value.kind === 'scalar' ? value.value : undefined;
    if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0 || number > max) {
      this.fail(
        value.line,
        `config error, expected '${key}' to be a whole number from 0 to ${max}, got ${shown(value)}`,
      );
    }
    return number;
  }
}

/** The line a key is written on, or the map's own line when it is absent. */
export function lineOf(map: YamlMap, key: string): number {
  const value = map.entries.get(key);
  return value === undefined ? map.line : value.keyLine;
}

/** Whether a value is absent or written empty (`key:`), which the reference reads as not given. */
export function isAbsent(value: YamlValue | undefined): boolean {
  return value === undefined || (value.kind === 'scalar' && value.value === null);
}
