// /console/agents: every agent, linking to its page.

import { api } from "../api.js";
import { h, replace } from "../dom.js";
import { agentList } from "./overview.js";

export async function render({ main, signal, title }) {
  title("Agents");
  const agents = await api("/agents", { signal });
  replace(
    main,
    h("h1", { id: "agents-title" }, "Agents"),
    h("p", {}, "Open an agent to see its tools, sub-agents and memory, and to chat with it."),
    agentList(agents),
  );
}
