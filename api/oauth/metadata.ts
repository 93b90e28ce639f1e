/**
 * What the service says of itself to OAuth clients: each workspace's MCP endpoint is a protected
 * resource (RFC 9728) whose metadata names its authorization servers: the company's OpenID
 * provider (VFS_OAUTH_ISSUER) and the built-in one (RFC 8414). Every
 * URL here is made from the public base URL (VFS_PUBLIC_URL, else the URL printed at start),
 * never from a request's Host header: a client must not be sent elsewhere by a forged Host.
 */
import { WORKSPACE_NAME } from '../contract/params.js';

/** The one scope: read the workspace's files through the four read tools. */
export const SCOPE = 'vfs:read';

/** The paths of the authorization server's endpoints. */
export const PATHS = {
  authorize: '/oauth/authorize',
  token: '/oauth/token',
  register: '/oauth/register',
  revoke: '/oauth/revoke',
  authorizationServer: '/.well-known/oauth-authorization-server',
  protectedResource: '/.well-known/oauth-protected-resource',
} as const;

/** A workspace's MCP endpoint: the resource its access tokens are issued for (RFC 8707). */
export function resourceUrl(base: string, workspace: string): string {
  return `${base}/v1/workspaces/${workspace}/mcp`;
}

/** Where a workspace's protected-resource metadata is (RFC 9728 3.1: the well-known path before the resource's path). */
export function resourceMetadataUrl(base: string, workspace: string): string {
  return `${base}${PATHS.protectedResource}/v1/workspaces/${workspace}/mcp`;
}

/**
 * The workspace a `resource` parameter names, or null when it names none of this service's MCP
 * endpoints. Compared as a string: no normalization, so one resource has one spelling.
 */
export function resourceWorkspace(base: string, resource: string): string | null {
  const prefix = `${base}/v1/workspaces/`;
  if (!resource.startsWith(prefix) || !resource.endsWith('/mcp')) return null;
  const workspace = resource.slice(prefix.length, -'/mcp'.length);
  return WORKSPACE_NAME.test(workspace) ? workspace : null;
}

/** The `WWW-Authenticate` value of a 401 from a workspace's MCP endpoint (RFC 9728 5.1, RFC 6750 3). */
export function mcpChallenge(base: string, workspace: string, credentialSent: boolean): string {
  const error = credentialSent ? ', error="invalid_token"' : '';
  return `Bearer resource_metadata="${resourceMetadataUrl(base, workspace)}", scope="${SCOPE}"${error}`;
}

/**
 * RFC 9728 2: a workspace's protected-resource metadata. `authorizationServers`: the company's
 * issuer (VFS_OAUTH_ISSUER) first, then the built-in server (`base`) when it is on.
 */
export function protectedResourceMetadata(base: string, workspace: string, authorizationServers: readonly string[]): Record<string, unknown> {
  return {
    resource: resourceUrl(base, workspace),
    authorization_servers: authorizationServers,
    scopes_supported: [SCOPE],
    bearer_methods_supported: ['header'],
    resource_name: `agent-vfs workspace ${workspace}`,
  };
}

/**
 * RFC 8414 2: the authorization server's metadata. Public clients only (PKCE with S256, no client
 * secret); `iss` on every authorization response (RFC 9207). A client registers dynamically
 * (RFC 7591) or names its Client ID Metadata Document by an https URL as its client_id.
 */
export function authorizationServerMetadata(base: string): Record<string, unknown> {
  return {
    issuer: base,
    authorization_endpoint: base + PATHS.authorize,
    token_endpoint: base + PATHS.token,
    registration_endpoint: base + PATHS.register,
    revocation_endpoint: base + PATHS.revoke,
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    scopes_supported: [SCOPE],
    authorization_response_iss_parameter_supported: true,
    client_id_metadata_document_supported: true,
  };
}
