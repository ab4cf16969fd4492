// `sluice serve --region eu --global-redis <url>`: the service's policies share one limit across regions.
import { type BudgetOptions, type Policy, RedisStore } from 'sluice';
import { optional, parseDuration, stringFlag, type Values } from './args.js';
import type { Config } from './config.js';
import { CliError } from './errors.js';
import { type Connection, connect } from './redis.js';

/** Flags `serve` takes for a global budget. */
export const BUDGET_FLAGS = {
  region: { type: 'string' },
  regions: { type: 'string' },
  'global-redis': { type: 'string' },
} as const;

export const BUDGET_FLAGS_HELP = `  --region <name>     this service's region: its policies share their limits with the other
                      regions' services through a ledger in --global-redis (see docs/regions.md);
                      decisions stay in this region's store (--redis, or memory)
  --regions <a,b,c>   every region sharing them, the same list everywhere (default: the config's
                      budget.regions)
  --global-redis <url>
                      the Redis every region reaches, where the ledger lives (also
                      $SLUICE_GLOBAL_REDIS_URL); asked in the background, never per request.
                      The config's "budget" section may list the policies that share a limit
                      ("policies", default: every policy but slidingLog ones), and set
                      "leaseMs", "floor" and "reserve".`;

/** What the policies share a budget with, once the global store is connected. */
export interface BudgetPart {
  /** The `budget` option for a policy, or undefined for one that stays this region's own. */
  budgetFor(name: string, policy: Policy): BudgetOptions | undefined;
  /** The `budget` option of Envoy's rules (every rule but sliding logs and per-descriptor overrides). */
  readonly options: BudgetOptions;
  /** For the banner: the region, the ledger's address, which policies share and which stay regional. */
  readonly banner: string;
  readonly json: Record<string, unknown>;
  close(): Promise<void>;
}

interface BudgetPlan {
  readonly region: string;
  readonly regions: readonly string[];
  readonly url: string;
  readonly timeoutMs: number;
}

/** The budget the flags ask for, or undefined without `--region`; a missing piece is a CliError (exit 2). */
function plan(values: Values, config: Config): BudgetPlan | undefined {
  const region = stringFlag(values, 'region');
  const url = stringFlag(values, 'global-redis') ?? process.env.SLUICE_GLOBAL_REDIS_URL;
  if (region === undefined) {
    if (stringFlag(values, 'global-redis') !== undefined || stringFlag(values, 'regions') !== undefined) {
      throw new CliError(
        '`--global-redis` and `--regions` share a budget across regions: give `--region <name>` too.',
      );
    }
    return undefined;
  }
  if (url === undefined) {
    throw new CliError(
      '`--region` shares the policies across regions through a ledger every region reaches: give `--global-redis <url>` (or $SLUICE_GLOBAL_REDIS_URL).',
    );
  }
  const listed = stringFlag(values, 'regions');
  const regions = listed === undefined ? config.budget.regions : listed.split(',').map((name) => name.trim());
  if (regions === undefined) {
    throw new CliError(
      '`--region` needs every region sharing the budget: give `--regions eu,us,ap`, or "regions" in the config\'s "budget" section.',
    );
  }
  if (!regions.includes(region)) {
    throw new CliError(
      `--region ${JSON.stringify(region)} is not one of the regions (${regions.join(', ')}).`,
    );
  }
  return { region, regions, url, timeoutMs: optional(values, 'timeout', parseDuration, 5000) };
}

/** Whether a policy shares the budget: listed in the config, or (no list) any but a sliding log. */
function shares(config: Config, name: string, policy: Policy): boolean {
  const listed = config.budget.policies;
  return listed === undefined ? policy.rule.name !== 'sliding-log' : listed.includes(name);
}

/** Connects to the global store when `--region` asks for a budget; undefined otherwise. */
export async function startBudgetPart(
  values: Values,
  config: Config,
  prefix: string,
): Promise<BudgetPart | undefined> {
  const budget = plan(values, config);
  if (budget === undefined) return undefined;
  const connection: Connection = await connect(budget.url, budget.timeoutMs, { persistent: true });
  const global = new RedisStore({ client: connection.client, prefix });
  const { leaseMs, floor, reserve } = config.budget;
  const settings = {
    ...(leaseMs === undefined ? {} : { leaseMs }),
    ...(floor === undefined ? {} : { floor }),
    ...(reserve === undefined ? {} : { reserve }),
  };
  const shared = [...config.policies]
    .filter(([name, policy]) => shares(config, name, policy))
    .map(([name]) => name);
  const own = [...config.policies.keys()].filter((name) => !shared.includes(name));
  const options: BudgetOptions = { global, region: budget.region, regions: budget.regions, ...settings };
  return {
    budgetFor: (name, policy) => (shares(config, name, policy) ? options : undefined),
    options,
    banner: `  budget: region ${budget.region} of ${budget.regions.join(', ')}, ledger at ${connection.label}: ${shared.length === 0 ? 'no policy shares it' : `${shared.join(', ')} shared`}${own.length === 0 ? '' : `; ${own.join(', ')} this region's own`}`,
    json: { region: budget.region, regions: budget.regions, ledger: connection.label, shared, own },
    close: () => connection.close(),
  };
}
