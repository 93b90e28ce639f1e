/**
 * The work one analysis of one pattern may do. Every analysis (trigram plan, required literals)
 * gets a Budget of its own, passed down, so no state of a call lives in a module.
 */

/** Units of work (nodes, bytes of set strings, query operations) before an analysis gives up. */
const WORK_BUDGET = 400_000;

/** Thrown when a budget runs out; the caller falls back to an answer that is never narrower. */
export class GiveUp extends Error {}

/** A countdown of work units; `spend` throws GiveUp once it is exhausted. */
export class Budget {
  private left: number;

  constructor(units = WORK_BUDGET) {
    this.left = units;
  }

  /** Spends `n` units; throws GiveUp when none are left. */
  spend(n: number): void {
    this.left -= n;
    if (this.left < 0) throw new GiveUp('work budget exceeded');
  }
}
