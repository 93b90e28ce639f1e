/**
 * The part of oidc-provider (a test dependency, shipped without types) that the tests use: a
 * provider configured in code, served through its Node.js request listener.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  /** What `getResourceServerInfo` says of a resource: its audience, scope, and token format. */
  interface ResourceServer {
    scope: string;
    audience?: string;
    accessTokenTTL?: number;
    accessTokenFormat?: 'opaque' | 'jwt';
    jwt?: { sign?: { alg: string } };
  }

  /** The provider's settings, as far as the tests set them. */
  interface Configuration {
    jwks?: { keys: object[] };
    clients?: object[];
    scopes?: string[];
    features?: {
      devInteractions?: { enabled: boolean };
      clientCredentials?: { enabled: boolean };
      resourceIndicators?: {
        enabled: boolean;
        defaultResource?: (ctx: unknown) => string | undefined;
        useGrantedResource?: (ctx: unknown) => boolean;
        getResourceServerInfo?: (ctx: unknown, resource: string, client: unknown) => ResourceServer;
      };
    };
    extraTokenClaims?: (ctx: unknown, token: { clientId?: string }) => Record<string, unknown> | undefined;
  }

  /** An OpenID provider. */
  export default class Provider {
    constructor(issuer: string, configuration: Configuration);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
