/**
 * The signed-in credential. It lives in this tab's memory and its sessionStorage only, so it
 * ends with the tab: never localStorage, a cookie or a URL. `signOut` forgets it.
 */
const KEY = 'agent-vfs.credential';

/** Who the credential is, as GET /v1/whoami says. */
export type Identity = { kind: 'management_key' } | { kind: 'token'; id: string; workspace: string; claims: string[]; expiresAt: string };

let credential: string | null = sessionStorage.getItem(KEY);

/** The credential, or null when signed out. */
export function currentCredential(): string | null {
  return credential;
}

/** Keeps `value` for this tab. */
export function remember(value: string): void {
  credential = value;
  sessionStorage.setItem(KEY, value);
}

/** Forgets the credential. */
export function forget(): void {
  credential = null;
  sessionStorage.removeItem(KEY);
}
