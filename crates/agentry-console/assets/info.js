// What the server says of itself (`GET /api/info`): name, version, database, authentication.
// Read once when the console starts.

import { api } from "./api.js";

let info = null;

export async function loadServerInfo() {
  info = await api("/api/info");
  return info;
}

export function serverInfo() {
  return info;
}
