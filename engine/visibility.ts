/**
 * Who may see which file. The rule (DESIGN.md section 3): a management key (claims null) sees
 * everything; a token with the claim `*` sees every file; a file without claims is visible to
 * every token; otherwise a file is visible when the token's claims and the file's claims share
 * at least one value. Every tool applies this before it reads or reports anything about a
 * file, so an invisible file is indistinguishable from a missing one.
 */

/** The caller's claims: null for a management key, else the token's claims. */
export type Claims = readonly string[] | null;

/** Whether a caller with these claims sees every file. SECURITY: null (management key) or a `*` claim. */
function seesEverything(claims: Claims): boolean {
  return claims === null || claims.includes('*');
}

/**
 * What decides which files a caller sees, for the keys of answers kept per view
 * (core/answer-memory.ts): `*` for one that sees all, else its claims, each once, sorted.
 */
export function viewOf(claims: Claims): string | string[] {
  return seesEverything(claims) ? '*' : [...new Set(claims)].sort();
}

/** A compiled visibility check for one caller. */
export class Visibility {
  private readonly all: boolean;
  private readonly claims: ReadonlySet<string>;

  constructor(tokenClaims: Claims) {
    this.all = seesEverything(tokenClaims);
    this.claims = new Set(tokenClaims ?? []);
  }

  /** True when the caller sees every file (no per-file check needed). */
  get seesAll(): boolean {
    return this.all;
  }

  /** Whether the caller may see a file with these claims (null: visible to every token). */
  canSee(fileClaims: readonly string[] | null): boolean {
    // SECURITY: the only place a file's claims are compared with the caller's.
    if (this.all || fileClaims === null) return true;
    for (let i = 0; i < fileClaims.length; i++) {
      if (this.claims.has(fileClaims[i])) return true;
    }
    return false;
  }
}
