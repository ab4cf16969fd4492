// Reads the config files (one file, or every .yaml of a directory) and notices when they change.
import { createHash } from 'node:crypto';
import { type FSWatcher, readdirSync, readFileSync, statSync, watch } from 'node:fs';
import { join, resolve } from 'node:path';
import { ERROR_CODES, SluiceError } from 'sluice';
import type { ConfigSource } from './config.js';

/** What was read, and a fingerprint of it: the same files with the same text give the same one. */
export interface ReadFiles {
  readonly sources: readonly ConfigSource[];
  readonly fingerprint: string;
}

function describeFsError(error: unknown): string {
  const code = (error as { code?: string }).code;
  if (code === 'ENOENT') return 'does not exist';
  if (code === 'EACCES') return 'cannot be read (permission denied)';
  return `cannot be read (${code ?? String(error)})`;
}

/**
 * The config files at `path`: the file itself, or the `.yaml` and `.yml` files of the directory in
 * name order, hidden ones aside. Symbolic links are followed: a Kubernetes ConfigMap mounts its keys
 * as links into a `..data` directory that is swapped whole on update.
 */
export function readConfigFiles(path: string): ReadFiles {
  const where = resolve(path);
  let files: string[];
  try {
    if (statSync(where).isDirectory()) {
      files = readdirSync(where)
        .filter((name) => !name.startsWith('.') && /\.ya?ml$/.test(name))
        .sort()
        .map((name) => join(where, name))
        .filter((file) => statSync(file).isFile());
    } else files = [where];
  } catch (error) {
    throw new SluiceError(ERROR_CODES.INVALID_OPTION, `The Envoy config ${where} ${describeFsError(error)}.`);
  }
  if (files.length === 0) {
    throw new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `The Envoy config directory ${where} holds no .yaml or .yml file.`,
    );
  }
  const hash = createHash('sha256');
  const sources = files.map((file) => {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        `The Envoy config file ${file} ${describeFsError(error)}.`,
      );
    }
    hash.update(file).update('\0').update(text).update('\0');
    return { file, text };
  });
  return { sources, fingerprint: hash.digest('hex') };
}

/** Options of {@link watchConfig}. */
export interface WatchOptions {
  readonly path: string;
  /** The fingerprint of the files in force, so that only a change is reported. */
  readonly fingerprint: string;
  /** Called with files whose text differs from the last seen; it puts them in force or refuses them. */
  readonly onChange: (files: ReadFiles) => void;
  /** Called when the files cannot be read (a swap in progress, a removed file); the last config stays. */
  readonly onUnreadable: (error: unknown) => void;
  /**
   * How often the files are read again, whatever the watcher reports: events are not delivered for
   * every kind of change on every file system (a symlink swap, a network mount).
   * @default 500
   */
  readonly intervalMs?: number;
}

/**
 * Watches the config: a file system watcher on the directory reacts at once (after 50 ms for a
 * write to settle), and a read every `intervalMs` catches what the watcher misses. Returns stop().
 */
export function watchConfig(options: WatchOptions): () => void {
  const where = resolve(options.path);
  let fingerprint = options.fingerprint;
  let lastError = '';
  let pending: NodeJS.Timeout | undefined;
  const check = (): void => {
    pending = undefined;
    let files: ReadFiles;
    try {
      files = readConfigFiles(where);
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      if (text !== lastError) options.onUnreadable(error);
      lastError = text;
      return;
    }
    lastError = '';
    if (files.fingerprint === fingerprint) return;
    fingerprint = files.fingerprint;
    options.onChange(files);
  };
  const soon = (): void => {
    if (pending === undefined) pending = setTimeout(check, 50);
  };
  let watcher: FSWatcher | undefined;
  try {
    const directory = statSync(where).isDirectory() ? where : resolve(where, '..');
    watcher = watch(directory, { persistent: false }, soon);
    watcher.on('error', () => watcher?.close());
  } catch {
    // Some file systems cannot be watched: the interval still reads them.
  }
  const interval = setInterval(check, options.intervalMs ?? 500);
  interval.unref();
  return () => {
    clearInterval(interval);
    if (pending !== undefined) clearTimeout(pending);
    watcher?.close();
  };
}
