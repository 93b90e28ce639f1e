/**
 * What the OAuth tests share: calling a read tool through a connected MCP client.
 */
import type { Client } from '@modelcontextprotocol/client';
import { expect } from 'vitest';

/** The text of a tool call that must succeed. */
export async function toolText(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const result = (await client.callTool({ name, arguments: args })) as { content: Array<{ text: string }>; isError?: boolean };
  expect(result.isError ?? false).toBe(false);
  return result.content[0].text;
}
