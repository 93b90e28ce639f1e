/**
 * The company's own OpenID provider (VFS_OAUTH_ISSUER): its JWT access tokens, accepted on a
 * workspace's MCP endpoint beside the built-in authorization server's (docs/oauth.md).
 *
 * The provider's keys are found through OpenID Connect discovery (`{issuer}/.well-known/
 * openid-configuration`, whose `issuer` must equal the configured one) and its `jwks_uri`, read
 * by jose's remote key set: cached, fetched again after ten minutes, and at once (at most every
 * few seconds) for a `kid` it does not hold, so a rotated key is taken without a restart.
 * Discovery is tried at start without being waited for, and again at a request while it has not
 * succeeded (at most every few seconds): the service starts while the provider is down, and
 * answers 503 until it is reachable.
 *
 * A token is verified for one workspace: signature (RS256, ES256 or EdDSA: never `none` or an
 * HMAC), `iss`, `aud` = that workspace's MCP endpoint URL, `nbf` (30 s of clock leeway), `exp`
 * (on this service's clock: a principal is refused once past it, cached or not), `sub`; then the workspaces claim must name the workspace, which must exist in the configured
 * account. It becomes a principal as a scoped token of that workspace would, marked `mcpOnly`:
 * visibility claims `user:<sub>` and `group:<value>` for each value of the groups claim.
 */
import { createRemoteJWKSet, errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { VfsError } from '../../core/errors.js';
import { CLAIM, WORKSPACE_NAME } from '../contract/params.js';
import { type JwtVerifier, type Principal, unauthenticated } from '../gate/auth.js';
import type { Lookups } from '../gate/lookups.js';

/** What the verifier needs. */
export interface IssuerOptions {
  /** The issuer URL, exactly as its discovery document and its tokens' `iss` write it. */
  url: string;
  /** The id of the one account whose workspaces its tokens may read. */
  accountId: string;
  /** The name of that account, for messages. */
  account: string;
  /** The claim naming the workspaces a token may read: a string or an array of strings. */
  workspacesClaim: string;
  /** The claim whose values become visibility claims `group:<value>`. */
  groupsClaim: string;
  /** A workspace's MCP endpoint URL: the audience its tokens must name. */
  audience: (workspace: string) => string;
  /** The service's log: discovery's outcome. */
  log: { info(message: string): void; error(message: string, error?: unknown): void };
}

/** SECURITY: the only signing algorithms taken: asymmetric ones; `none` and every HS* are refused. */
export const ALGORITHMS = ['RS256', 'ES256', 'EdDSA'];
/** Clock leeway for `nbf` and `exp` against the provider's clock. */
const CLOCK_TOLERANCE_SECONDS = 30;
/** Shortest wait before discovery is tried again after a failure, and before a key set missing a `kid` is fetched again. */
const RETRY_MS = 5_000;
/** Longest wait for the discovery document or the key set. */
const FETCH_TIMEOUT_MS = 5_000;
/** How long the key set is used before it is fetched again. */
const KEYS_MAX_AGE_MS = 10 * 60_000;
/** Largest discovery document read. */
const MAX_DISCOVERY_BYTES = 256 * 1024;
/** OpenID Connect Core 2: a `sub` is at most 255 ASCII characters. */
const MAX_SUBJECT = 255;

/** Verifies the company issuer's access tokens. */
export class IssuerTokens implements JwtVerifier {
  private keys: JWTVerifyGetKey | null = null;
  private discovering: Promise<JWTVerifyGetKey> | null = null;
  private failedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly options: IssuerOptions,
    private readonly lookups: Lookups,
  ) {}

  /** Starts discovery without waiting for it: a provider that is down does not stop the start. */
  start(): void {
    this.keySet().catch(() => {});
  }

  /**
   * The principal of `token` presented on `workspace`'s MCP endpoint; a 401 saying why it is
   * refused, or a 503 while the provider's keys cannot be had.
   */
  async verify(token: string, workspace: string): Promise<Principal> {
    const o = this.options;
    if (!WORKSPACE_NAME.test(workspace)) throw unauthenticated(`no workspace is named ${JSON.stringify(workspace.slice(0, 80))}`);
    const keys = await this.keySet();
    const payload = await jwtVerify(token, keys, {
      issuer: o.url,
      audience: o.audience(workspace),
      algorithms: ALGORITHMS,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ['exp', 'sub'],
    }).then(
      (verified) => verified.payload,
      (error: unknown) => {
        throw refusal(error, o.audience(workspace));
      },
    );
    const subject = payload.sub!;
    if (subject.length > MAX_SUBJECT) throw unauthenticated(`its sub is longer than ${MAX_SUBJECT} characters`);
    // SECURITY: the provider says which workspaces its subject may read; the audience alone only
    // says the token was meant for this endpoint.
    if (!stringsOf(payload, o.workspacesClaim).includes(workspace)) {
      throw unauthenticated(`its ${o.workspacesClaim} claim does not name workspace ${workspace}`);
    }
    const workspaceId = await this.lookups.workspaceId(o.accountId, workspace).catch((error: unknown) => {
      if (error instanceof VfsError && error.code === 'NO_SUCH_WORKSPACE') throw unauthenticated(`account ${o.account} has no workspace ${workspace}`);
      throw error;
    });
    return {
      kind: 'token',
      accountId: o.accountId,
      // The rate limits count per subject, whichever of its tokens it sends.
      actorId: `oidc:${subject}`,
      workspaceId,
      claims: visibilityClaims(subject, stringsOf(payload, o.groupsClaim)),
      expiresAt: payload.exp! * 1000,
      grantId: null,
      mcpOnly: true,
      subject,
    };
  }

  /** The key set, after discovery; discovery again when it has not succeeded (at most every RETRY_MS). */
  private keySet(): Promise<JWTVerifyGetKey> {
    if (this.keys !== null) return Promise.resolve(this.keys);
    if (this.discovering !== null) return this.discovering;
    const unavailable = new VfsError('UNAVAILABLE', { what: `the OpenID provider ${this.options.url} (its discovery document)` }, { 'retry-after': '5' });
    if (Date.now() - this.failedAt < RETRY_MS) return Promise.reject(unavailable);
    this.discovering = discover(this.options.url)
      .then(
        (jwksUri) => {
          this.keys = createRemoteJWKSet(new URL(jwksUri), {
            timeoutDuration: FETCH_TIMEOUT_MS,
            cooldownDuration: RETRY_MS,
            cacheMaxAge: KEYS_MAX_AGE_MS,
          });
          this.options.log.info(`OpenID provider ${this.options.url}: keys at ${jwksUri}`);
          return this.keys;
        },
        (error: unknown) => {
          this.failedAt = Date.now();
          this.options.log.error(`OpenID provider ${this.options.url}: discovery failed (tried again at a request, at most every ${RETRY_MS / 1000} s)`, error);
          throw unavailable;
        },
      )
      .finally(() => {
        this.discovering = null;
      });
    return this.discovering;
  }
}

/** The `jwks_uri` of the issuer's discovery document, whose `issuer` must be the configured URL (OpenID Connect Discovery 4.3). */
async function discover(issuer: string): Promise<string> {
  const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const response = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } });
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
  const text = await boundedText(response, MAX_DISCOVERY_BYTES);
  const document = JSON.parse(text) as { issuer?: unknown; jwks_uri?: unknown };
  if (document.issuer !== issuer) throw new Error(`${url} names issuer ${JSON.stringify(document.issuer)}, not ${issuer}`);
  const jwksUri = document.jwks_uri;
  if (typeof jwksUri !== 'string' || !URL.canParse(jwksUri)) throw new Error(`${url} has no jwks_uri URL`);
  const keysUrl = new URL(jwksUri);
  // SECURITY: the keys decide who reads: fetched over TLS unless the issuer itself is loopback http.
  if (keysUrl.protocol !== 'https:' && !(keysUrl.protocol === 'http:' && issuer.startsWith('http:'))) {
    throw new Error(`${url} names jwks_uri ${jwksUri}, which is not https`);
  }
  return jwksUri;
}

/** A response's body as text, refused past `limit` bytes. */
async function boundedText(response: Response, limit: number): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    if (size > limit) throw new Error(`the discovery document is larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A claim's values: a string is one, an array of strings is each; anything else none. */
function stringsOf(payload: JWTPayload, claim: string): string[] {
  const value = payload[claim];
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/**
 * SECURITY: the visibility claims of a token: `user:<sub>` and `group:<value>` for each value of
 * the groups claim. A value that is no valid id (`[A-Za-z0-9._@-]{1,128}`) gives no claim; never
 * `*`, so no token of the provider sees every file.
 */
export function visibilityClaims(subject: string, groups: readonly string[]): string[] {
  const claims = new Set<string>();
  for (const claim of [`user:${subject}`, ...groups.map((g) => `group:${g}`)]) {
    if (claim !== '*' && CLAIM.test(claim)) claims.add(claim);
  }
  return [...claims];
}

/** A 401 for a token jose refused, saying why; a 503 when the key set could not be fetched. */
function refusal(error: unknown, audience: string): VfsError {
  if (error instanceof errors.JWTExpired) return unauthenticated('token expired');
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return unauthenticated(`this access token was issued for another resource, not ${audience}`);
    if (error.claim === 'iss') return unauthenticated('this access token was issued by another issuer');
    if (error.claim === 'nbf') return unauthenticated('this access token is not valid yet (nbf)');
    return unauthenticated(`invalid token: ${error.message}`);
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return unauthenticated(`invalid token: signing algorithm not accepted (${ALGORITHMS.join(', ')} only)`);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return unauthenticated('invalid token: the signature does not verify');
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) {
    return unauthenticated("invalid token: no key of the issuer's key set matches its kid");
  }
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) return unauthenticated(`malformed token: ${error.message}`);
  // The key set could not be fetched (timeout, network, not a JSON key set): no fault of the token.
  return new VfsError('UNAVAILABLE', { what: "the OpenID provider's key set" }, { 'retry-after': '5' });
}
