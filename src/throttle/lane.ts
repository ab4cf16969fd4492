// One key's calls in one process: a few slots taken ahead from the store, each checked for a pause when it comes.
import { performance } from 'node:perf_hooks';
import { askSlot, isLateSlot, type Pipeline, type Slot } from '../core/index.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import { isStoreFailure } from '../types.js';
import { type Waiter, WaiterQueue } from './queue.js';

/** A call waiting in a lane: started when a slot comes, refused when none comes within reach. */
export interface LaneWaiter extends Waiter {
  /** A slot came and no pause holds: the call may go now; a call that then does not run gives `slot` back. */
  go(slot: Slot): void;
  /** No slot within `maxWaitMs`: the call will not go. */
  refuse(error: SluiceError): void;
}

/** What a lane is set up with, by its throttle. */
export interface LaneSettings {
  readonly pipeline: Pipeline;
  readonly key: string;
  readonly maxWaitMs: number;
  /** The lane holds nothing any more: its throttle may forget it. */
  readonly idle: () => void;
}

/**
 * How many slots a lane holds ahead: at least MIN_LOOKAHEAD, at most MAX_LOOKAHEAD, one more when a
 * slot taken was free at once (the fleet does not keep up with the rate: slots go unused), one fewer
 * when it was further away than two round trips and SLACK_MS (more than enough is held). Each process
 * so holds about its share of a few round trips of slots, whatever the number of processes, and
 * slots go in about the order processes asked for them.
 */
const MIN_LOOKAHEAD = 4;
const MAX_LOOKAHEAD = 1000;
const SLACK_MS = 25;

/** The weight of the last round trip in the lane's running estimate. */
const ROUND_TRIP_WEIGHT = 0.2;

/** A slot the lane holds: when it comes (performance.now() time), and its timer. */
interface Held {
  readonly slot: Slot;
  wakeAt: number;
  timer: NodeJS.Timeout | undefined;
  /** Come, and waiting for a store call sent since to say whether a pause holds. */
  checking: boolean;
  /** Taken to replace a slot that came late: used even if it comes late too, so that calls go. */
  readonly replacing: boolean;
}

/**
 * The slots of one key in this process. It takes a few slots ahead (the store hands them out in
 * the order asked, across processes). A slot that comes goes once a store call sent after it came
 * says no pause holds: the call that takes the next slot, or one that only looks, shared by the
 * slots that come before it returns. So a call costs one store call while more wait behind it, and
 * a pause an upstream asked for stops every slot not yet gone, which moves on by the pause's shift.
 */
export class Lane {
  readonly #settings: LaneSettings;
  readonly #queue = new WaiterQueue<LaneWaiter>();
  readonly #held = new Set<Held>();
  /** Each store call in flight: when it was sent (performance.now()), and whether it takes a slot. */
  readonly #inFlight = new Map<number, { readonly sentAt: number; readonly taking: boolean }>();
  #calls = 0;
  /** A pause to write with the lane's next store call, in ms. */
  #pauseMs = 0;
  /** The store's round trip as this process sees it (event loop delays included), in ms: a running estimate. */
  #roundTripMs = 1;
  #lookahead = MIN_LOOKAHEAD;
  /** Slots let go because they came late, whose replacements are not yet taken. */
  #toReplace = 0;

  constructor(settings: LaneSettings) {
    this.#settings = settings;
  }

  /** Queues a call; it is started (`go`) when a slot comes. */
  enqueue(waiter: LaneWaiter): void {
    this.#queue.push(waiter);
    this.#pump();
  }

  /**
   * Queues again a call that was started and refused by the upstream: it keeps its turn, and the
   * pause the upstream asked for (ms, 0 for none) goes with the store call that takes its slot.
   */
  requeue(waiter: LaneWaiter, pauseMs: number): void {
    this.#queue.restore(waiter);
    this.pause(pauseMs);
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
    if (this.#pauseMs > 0) this.#ask(false);
  }

  /** Slots held (not yet come) and being taken: what the queued calls will use. */
  get #supply(): number {
    let supply = 0;
    for (const held of this.#held) if (!held.checking) supply++;
    for (const call of this.#inFlight.values()) if (call.taking) supply++;
    return supply;
  }

  /** Takes slots ahead while calls wait without one, up to the lookahead. */
  #pump(): void {
    const wanted = Math.min(this.#queue.size, this.#lookahead);
    while (this.#supply < wanted) this.#ask(true);
  }

  /**
   * One store call: takes a slot within `maxWaitMs` (or nothing: only looks), writes the pending
   * pause, and tells the slots that came before it was sent whether a pause holds.
   */
  #ask(taking: boolean): void {
    const sentAt = performance.now();
    const id = this.#calls++;
    this.#inFlight.set(id, { sentAt, taking });
    const pauseMs = this.#pauseMs;
    this.#pauseMs = 0;
    const { pipeline, key, maxWaitMs } = this.#settings;
    if (pauseMs > 0) pipeline.waited({ kind: 'paused', pauseMs });
    askSlot(pipeline, key, 1, undefined, taking ? maxWaitMs : -1, pauseMs).then(
      (slot) => {
        this.#inFlight.delete(id);
        this.#roundTripMs += ROUND_TRIP_WEIGHT * (performance.now() - sentAt - this.#roundTripMs);
        this.#checked(sentAt, slot);
        if (taking) this.#took(slot);
        this.#pump();
        this.#settle();
      },
      (error: unknown) => {
        // Only a call that is not valid rejects (the key was checked): refuse what waits.
        this.#inFlight.delete(id);
        const refusal =
          error instanceof SluiceError ? error : new SluiceError(ERROR_CODES.STORE, String(error));
        for (const waiter of this.#queue.drain()) waiter.refuse(refusal);
        for (const held of this.#held) this.#drop(held);
        this.#settle();
      },
    );
  }

  /** The answer to a slot taken ahead: held until it comes, used now, or a refusal for those without one. */
  #took(slot: Slot): void {
    const { decision } = slot;
    if (decision.allowed) {
      this.#adjust(decision.waitMs);
      const replacing = this.#toReplace > 0;
      if (replacing) this.#toReplace--;
      // A slot that is now was checked by the very call that took it.
      if (decision.waitMs === 0) this.#use(slot);
      else this.#hold(slot, performance.now() + decision.waitMs, replacing);
      return;
    }
    if (decision.reason === 'denied' && decision.retryAfterMs > this.#settings.maxWaitMs) {
      this.#refuseDenied(decision.retryAfterMs);
      return;
    }
    if (isStoreFailure(decision.reason) || decision.reason === 'denied') {
      // The failure policy denies, or an operator's denial ends within reach: asked again after its
      // retryAfterMs (waiters may run out of time meanwhile); counted in flight until then, so that
      // the pump does not ask at once.
      const id = this.#calls++;
      this.#inFlight.set(id, { sentAt: Number.NEGATIVE_INFINITY, taking: true });
      setTimeout(() => {
        this.#inFlight.delete(id);
        this.#pump();
        this.#settle();
      }, decision.retryAfterMs);
      return;
    }
    this.#refuseUncovered(decision.waitMs);
  }

  /** One more slot ahead when the one taken was free at once, one fewer when plenty are held. */
  #adjust(waitMs: number): void {
    if (waitMs === 0) this.#lookahead = Math.min(MAX_LOOKAHEAD, this.#lookahead + 1);
    else if (waitMs > 2 * this.#roundTripMs + SLACK_MS) {
      this.#lookahead = Math.max(MIN_LOOKAHEAD, this.#lookahead - 1);
    }
  }

  /** The next slot is beyond maxWaitMs: the calls no slot is held for would not get one in time. */
  #refuseUncovered(waitMs: number): void {
    const covered = this.#supply;
    const refusal = new SluiceError(
      ERROR_CODES.MAX_WAIT,
      `The next slot for \`${this.#settings.key}\` is ${waitMs} ms away, beyond \`maxWaitMs\` (${this.#settings.maxWaitMs} ms): the call was not made.`,
    );
    const waiting = this.#queue.drain();
    waiting.sort((a, b) => (a.priority !== b.priority ? b.priority - a.priority : a.seq - b.seq));
    waiting.forEach((waiter, i) => {
      if (i < covered) this.#queue.restore(waiter);
      else waiter.refuse(refusal);
    });
  }

  /** The key is denied (`limiter.deny()`) beyond maxWaitMs: no call waiting goes, and no slot held is used. */
  #refuseDenied(leftMs: number): void {
    const refusal = new SluiceError(
      ERROR_CODES.MAX_WAIT,
      `\`${this.#settings.key}\` is denied for ${leftMs} ms more, beyond \`maxWaitMs\` (${this.#settings.maxWaitMs} ms): the call was not made.`,
    );
    for (const waiter of this.#queue.drain()) waiter.refuse(refusal);
    for (const held of this.#held) this.#drop(held);
  }

  #hold(slot: Slot, wakeAt: number, replacing: boolean): void {
    const held: Held = { slot, wakeAt, timer: undefined, checking: false, replacing };
    this.#held.add(held);
    this.#arm(held);
  }

  #arm(held: Held): void {
    held.timer = setTimeout(() => this.#wake(held), Math.max(0, held.wakeAt - performance.now()));
  }

  /**
   * A held slot has come: it waits for a store call sent since to say no pause holds. One in flight
   * already serves; otherwise one is sent, taking the next slot if calls wait for one.
   */
  #wake(held: Held): void {
    held.timer = undefined;
    if (this.#queue.size === 0) {
      this.#drop(held);
      return;
    }
    if (!held.replacing && isLateSlot(this.#settings.pipeline.policy, 1, held.wakeAt, performance.now())) {
      // The process stalled past the slot: used now, it would go together with the slots after it
      // (and the fleet's on time). It is let go, not given back (see LATE_SLOT_MS), and the call
      // waits for a new one.
      this.#toReplace++;
      this.#held.delete(held);
      this.#pump();
      return;
    }
    held.checking = true;
    held.wakeAt = performance.now();
    for (const call of this.#inFlight.values()) if (call.sentAt >= held.wakeAt) return;
    const more = this.#supply < Math.min(this.#queue.size - this.#comeCount(), this.#lookahead);
    this.#ask(more);
  }

  #comeCount(): number {
    let come = 0;
    for (const held of this.#held) if (held.checking) come++;
    return come;
  }

  /**
   * A store call's answer, for the slots that came before it was sent: each goes, or, while a
   * pause holds, moves on by its shift (every slot handed out before the pause did).
   */
  #checked(sentAt: number, answer: Slot): void {
    const { decision } = answer;
    // An operator's denial holds the slots as a pause does, for what is left of it.
    const denied = decision.reason === 'denied';
    const pausedMs = denied ? decision.retryAfterMs : decision.pausedMs;
    const shiftMs = denied ? 0 : decision.shiftMs;
    const now = performance.now();
    for (const held of this.#held) {
      if (!held.checking || held.wakeAt > sentAt) continue;
      held.checking = false;
      if (pausedMs > 0) {
        held.wakeAt = Math.max(held.wakeAt + shiftMs, now + pausedMs);
        this.#arm(held);
      } else {
        this.#held.delete(held);
        this.#use(held.slot);
      }
    }
  }

  /** A slot that may be used now: the first waiting call goes; with none, the slot is given back. */
  #use(slot: Slot): void {
    const waiter = this.#queue.shift();
    if (waiter === undefined) void slot.giveBack();
    else waiter.go(slot);
  }

  #drop(held: Held): void {
    if (held.timer !== undefined) clearTimeout(held.timer);
    this.#held.delete(held);
    void held.slot.giveBack();
  }

  /** Gives back the furthest slot held beyond what the queued calls need. */
  #giveBackSpare(): void {
    let spare = 0;
    for (const held of this.#held) if (!held.checking) spare++;
    if (spare + this.#comeCount() <= this.#queue.size) return;
    let furthest: Held | undefined;
    for (const held of this.#held) {
      if (!held.checking && (furthest === undefined || held.wakeAt > furthest.wakeAt)) furthest = held;
    }
    if (furthest !== undefined) this.#drop(furthest);
  }

  /** Tells the throttle when the lane holds nothing, so that it can be forgotten. */
  #settle(): void {
    if (this.#queue.size === 0 && this.#held.size === 0 && this.#inFlight.size === 0) this.#settings.idle();
  }
}
