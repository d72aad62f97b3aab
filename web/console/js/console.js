// The console's shell: signs in as a party (a demo party's dev token in local runs, or a pasted token) and opens
// that party's screen. The token stays in this tab only (sessionStorage).

const roles = ["customer", "vendor", "rider", "technician", "admin"];
const byId = (id) => document.getElementById(id);

/** The claims of a JWT, unverified: the services verify it; the console only shows who it names. */
export function claimsOf(token) {
  const part = token.split(".")[1];
  if (!part) throw new Error("this is not a JWT (three dot-separated parts)");
  const json = atob(part.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(part.length / 4) * 4, "="));
  const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0))));
  if (!roles.includes(claims.role)) throw new Error(`the token's role '${claims.role}' is not one the console knows`);
  return claims;
}

function signIn(token) {
  const claims = claimsOf(token);
  sessionStorage.setItem("token", token);
  byId("picker").hidden = true;
  byId("sign-out").hidden = false;
  byId("signed-in").textContent = `Signed in as ${claims.name ?? claims.sub} (${claims.role})`;
  const screen = byId("screen");
  screen.hidden = false;
  screen.replaceChildren();
  const heading = document.createElement("h2");
  heading.textContent = `${claims.role[0].toUpperCase()}${claims.role.slice(1)}`;
  screen.append(heading);
  heading.tabIndex = -1;
  heading.focus();
}

function signOut() {
  sessionStorage.removeItem("token");
  location.reload();
}

async function listParties() {
  const list = byId("parties");
  const response = await fetch("dev-parties.json", { cache: "no-store" }).catch(() => null);
  if (!response?.ok) {
    byId("picker-help").textContent = "Paste an access token issued for this platform.";
    return;
  }
  for (const party of await response.json()) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.append(party.name);
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = `${party.role} · ${party.id}`;
    button.append(role);
    button.addEventListener("click", () => signIn(party.token));
    item.append(button);
    list.append(item);
  }
}

byId("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  try {
    signIn(byId("token").value.trim());
  } catch (error) {
    byId("picker-error").textContent = error.message;
  }
});
byId("sign-out").addEventListener("click", signOut);

const kept = sessionStorage.getItem("token");
if (kept) {
  try {
    signIn(kept);
  } catch {
    sessionStorage.removeItem("token");
  }
}
listParties();
