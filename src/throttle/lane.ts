// One key's calls in one process: a few slots taken ahead from the store, each checked for a pause when it comes.
import { performance } from 'node:perf_hooks';
import { askSlot, type Pipeline, type Slot } from '../core/index.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import { isStoreFailure } from '../types.js';
import { type Waiter, WaiterQueue } from './queue.js';

/** A call waiting in a lane: started when a slot comes, refused when none comes within reach. */
export interface LaneWaiter extends Waiter {
  /** A slot came and no pause holds: the call may go now. */
  go(): void;
  /** No slot within `maxWaitMs`: the call will not go. */
  refuse(error: SluiceError): void;
}

/** What a lane is set up with, by its throttle. */
export interface LaneSettings {
  readonly pipeline: Pipeline;
  readonly key: string;
  readonly maxWaitMs: number;
  /** Slots the lane holds ahead at most (see throttle's lookahead). */
  readonly lookahead: number;
  /** The lane holds nothing any more: its throttle may forget it. */
  readonly idle: () => void;
}

/** A slot the lane holds: when it comes (performance.now() time), and its timer. */
interface Held {
  readonly slot: Slot;
  wakeAt: number;
  timer: NodeJS.Timeout | undefined;
  /** Asked whether a pause holds, before it is used. */
  checking: boolean;
}

/**
 * The slots of one key in this process. It holds at most `lookahead` slots taken ahead (each
 * process holds a few, and the store hands them out in the order asked, across processes); when a
 * slot comes, one store call asks whether a pause holds and takes the next slot at once, so a call
 * costs one store call. A pause an upstream asked for moves every slot held by its shift.
 */
export class Lane {
  readonly #settings: LaneSettings;
  readonly #queue = new WaiterQueue<LaneWaiter>();
  readonly #held = new Set<Held>();
  /** Store calls in flight that take a slot. */
  #asking = 0;
  /** Store calls in flight that only check. */
  #checking = 0;
  /** A pause to write with the lane's next store call, in ms. */
  #pauseMs = 0;

  constructor(settings: LaneSettings) {
    this.#settings = settings;
  }

  /** Queues a call; it is started (`go`) when a slot comes. */
  enqueue(waiter: LaneWaiter): void {
    this.#queue.push(waiter);
    this.#pump();
  }

  /** Queues again a call that was started and refused by the upstream: it keeps its turn. */
  requeue(waiter: LaneWaiter): void {
    this.#queue.restore(waiter);
    this.#pump();
  }

  /** A call left before its slot came (aborted, out of time): a slot held for it is given back. */
  cancel(waiter: LaneWaiter): void {
    if (!this.#queue.remove(waiter)) return;
    this.#giveBackSpare();
    this.#settle();
  }

  /** Pauses the key for every process, for `pauseMs`: sent with the lane's next store call, now. */
  pause(pauseMs: number): void {
    this.#pauseMs = Math.max(this.#pauseMs, Math.ceil(pauseMs));
    this.#pump();
    // Nothing else asks the store now: a call of its own writes the pause.
    if (this.#pauseMs > 0) this.#ask(undefined, -1);
  }

  /** Slots taken or being taken, and not being checked: what the queued calls will use. */
  get #supply(): number {
    let checking = 0;
    for (const held of this.#held) if (held.checking) checking++;
    return this.#held.size - checking + this.#asking;
  }

  /** Takes slots ahead while calls wait without one, up to the lookahead. */
  #pump(): void {
    const wanted = Math.min(this.#queue.size, this.#settings.lookahead);
    while (this.#supply < wanted) this.#ask(undefined, this.#settings.maxWaitMs);
  }

  /**
   * One store call: takes a slot within `maxWaitMs` (-1: takes nothing), writes the pending pause,
   * and, for a slot that has come (`waking`), tells whether a pause holds.
   */
  #ask(waking: Held | undefined, maxWaitMs: number): void {
    const taking = maxWaitMs >= 0;
    if (taking) this.#asking++;
    else this.#checking++;
    const pauseMs = this.#pauseMs;
    this.#pauseMs = 0;
    const { pipeline, key } = this.#settings;
    if (pauseMs > 0) pipeline.waited({ kind: 'paused', pauseMs });
    askSlot(pipeline, key, 1, undefined, maxWaitMs, pauseMs).then(
      (slot) => {
        if (taking) this.#asking--;
        else this.#checking--;
        if (waking !== undefined) this.#checked(waking, slot);
        if (taking) this.#took(slot);
        this.#pump();
        this.#settle();
      },
      (error: unknown) => {
        // Only a call that is not valid rejects (the key was checked): refuse what waits.
        if (taking) this.#asking--;
        else this.#checking--;
        const refusal =
          error instanceof SluiceError ? error : new SluiceError(ERROR_CODES.STORE, String(error));
        for (const waiter of this.#queue.drain()) waiter.refuse(refusal);
        this.#settle();
      },
    );
  }

  /** The answer to a slot taken ahead: held until it comes, used now, or a refusal for those without one. */
  #took(slot: Slot): void {
    const { decision } = slot;
    if (decision.allowed) {
      // A slot that is now was checked by the very call that took it.
      if (decision.waitMs === 0) this.#use(slot);
      else this.#hold(slot, performance.now() + decision.waitMs);
      return;
    }
    if (isStoreFailure(decision.reason)) {
      // The failure policy denies: asked again after its retryAfterMs (waiters may run out of time
      // meanwhile). Counted as asking until then, so that the pump does not ask at once.
      this.#asking++;
      setTimeout(() => {
        this.#asking--;
        this.#pump();
        this.#settle();
      }, decision.retryAfterMs);
      return;
    }
    // The next slot is beyond maxWaitMs: the calls no slot is held for would not get one in time.
    const covered = this.#held.size + this.#asking;
    const refusal = new SluiceError(
      ERROR_CODES.MAX_WAIT,
      `The next slot for \`${this.#settings.key}\` is ${decision.waitMs} ms away, beyond \`maxWaitMs\` (${this.#settings.maxWaitMs} ms): the call was not made.`,
    );
    const waiting = this.#queue.drain();
    waiting.sort((a, b) => (a.priority !== b.priority ? b.priority - a.priority : a.seq - b.seq));
    waiting.forEach((waiter, i) => {
      if (i < covered) this.#queue.restore(waiter);
      else waiter.refuse(refusal);
    });
  }

  #hold(slot: Slot, wakeAt: number): void {
    const held: Held = { slot, wakeAt, timer: undefined, checking: false };
    this.#held.add(held);
    this.#arm(held);
  }

  #arm(held: Held): void {
    held.timer = setTimeout(() => this.#wake(held), Math.max(0, held.wakeAt - performance.now()));
  }

  /** A held slot has come: one store call checks for a pause, and takes the next slot if calls wait for one. */
  #wake(held: Held): void {
    held.timer = undefined;
    if (this.#queue.size === 0) {
      this.#drop(held);
      return;
    }
    held.checking = true;
    const more = this.#supply < Math.min(this.#queue.size - 1, this.#settings.lookahead);
    this.#ask(held, more ? this.#settings.maxWaitMs : -1);
  }

  /** A held slot's check came back: used, or moved on by the pause that holds. */
  #checked(held: Held, answer: Slot): void {
    held.checking = false;
    const { pausedMs, shiftMs } = answer.decision;
    if (pausedMs > 0) {
      // Every slot handed out before the pause moved on by its shift: this one follows.
      held.wakeAt = Math.max(held.wakeAt + shiftMs, performance.now() + pausedMs);
      this.#arm(held);
      return;
    }
    this.#held.delete(held);
    this.#use(held.slot);
  }

  /** A slot that may be used now: the first waiting call goes; with none, the slot is given back. */
  #use(slot: Slot): void {
    const waiter = this.#queue.shift();
    if (waiter === undefined) void slot.giveBack();
    else waiter.go();
  }

  #drop(held: Held): void {
    if (held.timer !== undefined) clearTimeout(held.timer);
    this.#held.delete(held);
    void held.slot.giveBack();
  }

  /** Gives back the furthest slot held beyond what the queued calls need. */
  #giveBackSpare(): void {
    if (this.#supply - this.#asking <= this.#queue.size) return;
    let furthest: Held | undefined;
    for (const held of this.#held) {
      if (!held.checking && (furthest === undefined || held.wakeAt > furthest.wakeAt)) furthest = held;
    }
    if (furthest !== undefined) this.#drop(furthest);
  }

  /** Tells the throttle when the lane holds nothing, so that it can be forgotten. */
  #settle(): void {
    if (this.#queue.size === 0 && this.#held.size === 0 && this.#asking === 0 && this.#checking === 0) {
      this.#settings.idle();
    }
  }
}
