// The console's shell: signs in as a party (a demo party's dev token in local runs, or a pasted token) and opens
// that party's screen. The token stays in this tab only (sessionStorage).
import { adminScreen } from "./admin.js";
import { Api } from "./api.js";
import { customerScreen } from "./customer.js";
import { riderScreen } from "./rider.js";
import { technicianScreen } from "./technician.js";
import { vendorScreen } from "./vendor.js";

const screens = {
  customer: customerScreen,
  vendor: vendorScreen,
  rider: riderScreen,
  technician: technicianScreen,
  admin: adminScreen,
};
const roles = Object.keys(screens);
const byId = (id) => document.getElementById(id);
let parties = [];

/** The claims of a JWT, unverified: the services verify it; the console only shows who it names. */
export function claimsOf(token) {
  const part = token.split(".")[1];
  if (!part) throw new Error("this is not a JWT (three dot-separated parts)");
  const json = atob(part.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(part.length / 4) * 4, "="));
  const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0))));
  if (!roles.includes(claims.role)) throw new Error(`the token's role '${claims.role}' is not one the console knows`);
  return claims;
}

async function signIn(token) {
  const claims = claimsOf(token);
  if (claims.exp && claims.exp * 1000 < Date.now()) throw new Error("this token has expired; ask for a new one");
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
  const failure = byId("screen-error");
  try {
    const api = new Api(token, (message) => (failure.textContent = message));
    await screens[claims.role](screen, { api, claims, parties });
  } catch (error) {
    failure.textContent = `This screen could not open: ${error.message}`;
  }
}

function signOut() {
  sessionStorage.removeItem("token");
  location.reload();
}

/** The demo parties `make run` seeded (local runs only; elsewhere the file is absent). */
async function loadParties() {
  const response = await fetch("dev-parties.json", { cache: "no-store" }).catch(() => null);
  parties = response?.ok ? await response.json() : [];
}

function listParties() {
  const list = byId("parties");
  if (parties.length === 0) {
    byId("picker-help").textContent = "Paste an access token issued for this platform.";
    return;
  }
  for (const party of parties) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.append(party.name);
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = `${party.role} · ${party.id}`;
    button.append(role);
    button.addEventListener("click", () =>
      signIn(party.token).catch((error) => (byId("picker-error").textContent = error.message)),
    );
    item.append(button);
    list.append(item);
  }
}

byId("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  signIn(byId("token").value.trim()).catch((error) => (byId("picker-error").textContent = error.message));
});
byId("token-form").querySelector("button").disabled = false;
byId("sign-out").addEventListener("click", signOut);

await loadParties();
const kept = sessionStorage.getItem("token");
if (kept) {
  await signIn(kept).catch(() => {
    sessionStorage.removeItem("token");
    location.reload();
  });
} else {
  listParties();
}
