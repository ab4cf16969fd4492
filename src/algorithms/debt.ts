// The policy options every algorithm shares for usage known after the fact: `maxDebt` and `unit`.
import { invalidOption } from '../errors.js';

/** The options {@link debtOptions} reads, as each algorithm's options declare them. */
export interface DebtOptions {
  /**
   * The most units an identifier may owe past its limit after `charge()` (or a settle that charges):
   * what a charge would take beyond it is cut off, and reported as the decision's `cutOff`. 0 lets
   * no charge pass the limit. Bounds how long a runaway charge can lock an identifier out: at most
   * the time the policy takes to pay `maxDebt` back on top of its own allowance.
   * @default the policy's allowance (its `limit`, `capacity` or `burst`; a call's own `limit` when it gives one)
   */
  readonly maxDebt?: number;
  /**
   * What one unit is, for response headers: `requests` (one per request; the IETF default),
   * `content-bytes` (the IETF registered unit for bytes of content, written as `qu="content-bytes"`),
   * or a unit of your own (`tokens`), with which the policy is left out of the rate-limit headers
   * rather than described as requests.
   * @default 'requests'
   */
  readonly unit?: string;
}

/** The parts of a policy these options make, for its body: `maxDebt` given or not, and the unit. */
export interface ResolvedDebt {
  /** The `maxDebt` given; `undefined` follows each limit's allowance. */
  readonly maxDebt: number | undefined;
  readonly unit: string;
  /** `,maxDebt=…,unit=…` for the policy's description, nothing for the defaults. */
  readonly described: string;
}

/** The longest unit name accepted; units are short words such as `content-bytes`. */
const MAX_UNIT_LENGTH = 64;

/**
 * Reads `maxDebt` and `unit` from an algorithm's options (named `<policy>.maxDebt`, `<policy>.unit`
 * in errors). `maxDebtCeiling` bounds `maxDebt` where the state grows with it (the sliding log).
 */
export function debtOptions(
  policy: string,
  raw: Record<string, unknown>,
  maxDebtCeiling = Number.MAX_SAFE_INTEGER,
): ResolvedDebt {
  const { maxDebt, unit } = raw;
  if (
    maxDebt !== undefined &&
    (typeof maxDebt !== 'number' || !Number.isSafeInteger(maxDebt) || maxDebt < 0 || maxDebt > maxDebtCeiling)
  ) {
    const most = maxDebtCeiling === Number.MAX_SAFE_INTEGER ? '' : ` of at most ${maxDebtCeiling}`;
    throw invalidOption(`${policy}.maxDebt`, `a whole number${most} (0 or more)`, maxDebt);
  }
  if (
    unit !== undefined &&
    (typeof unit !== 'string' || unit.length > MAX_UNIT_LENGTH || !/^[a-z][a-z0-9-]*$/.test(unit))
  ) {
    throw invalidOption(
      `${policy}.unit`,
      `a unit name of lowercase letters, digits and dashes, at most ${MAX_UNIT_LENGTH} characters ('requests', 'content-bytes', 'tokens')`,
      unit,
    );
  }
  const resolvedUnit = (unit as string | undefined) ?? 'requests';
  let described = maxDebt === undefined ? '' : `,maxDebt=${maxDebt}`;
  if (resolvedUnit !== 'requests') described += `,unit=${resolvedUnit}`;
  return { maxDebt: maxDebt as number | undefined, unit: resolvedUnit, described };
}

/** The option names of {@link DebtOptions}, for each algorithm's list of known keys. */
export const DEBT_OPTION_KEYS = ['maxDebt', 'unit'] as const;
