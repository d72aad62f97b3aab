// The device's location and camera for the rider's and technician's screens, and RDR-020's permission screen: when
// access is denied the action is blocked behind a screen that says why, until access is granted.
import { ack } from "./api.js";
import { el, modal, openDialog } from "./dom.js";

/** RDR-020's messages, word for word. */
export const PERMISSION_MESSAGES = {
  geolocation:
    "Location access is required to go online, receive new delivery tasks, and use navigation. Please enable location services in your settings.",
  camera:
    "Camera access is required to take photos for Proof of Delivery. Please enable camera access in your settings.",
};

/** Thrown when the browser refuses location or camera access. */
export class PermissionDenied extends Error {
  constructor(permission) {
    super(PERMISSION_MESSAGES[permission]);
    this.permission = permission;
  }
}

async function permissionState(permission) {
  try {
    return (await navigator.permissions.query({ name: permission })).state;
  } catch {
    return "prompt";
  }
}

/** A fresh, precise fix as the API takes it ({lat, lng, accuracyMeters, recordedAt}); PermissionDenied if refused. */
export async function currentFix() {
  if ((await permissionState("geolocation")) === "denied") throw new PermissionDenied("geolocation");
  // Right after access is granted the first fix can fail (no position yet): try a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      const position = await new Promise((resolve, reject) =>
        navigator.geolocation.getCurrentPosition(resolve, reject, {
          enableHighAccuracy: true,
          maximumAge: 0,
          timeout: 15000,
        }),
      );
      return fixOf(position);
    } catch (error) {
      if (error.code === 1) throw new PermissionDenied("geolocation");
      if (attempt === 3)
        throw new Error(`No location fix yet (${error.message || "position unavailable"}); try again.`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

function fixOf(position) {
  const { latitude, longitude, accuracy, heading, speed } = position.coords;
  const fix = {
    lat: latitude,
    lng: longitude,
    accuracyMeters: accuracy,
    recordedAt: new Date(position.timestamp).toISOString(),
  };
  if (Number.isFinite(heading)) fix.headingDegrees = heading;
  if (Number.isFinite(speed)) fix.speedMps = speed;
  return fix;
}

/** The camera's stream for a proof photo; PermissionDenied if refused. */
export async function openCamera() {
  if ((await permissionState("camera")) === "denied") throw new PermissionDenied("camera");
  try {
    return await navigator.mediaDevices.getUserMedia({ video: { facingMode: "environment" } });
  } catch (error) {
    if (error.name === "NotAllowedError" || error.name === "SecurityError") throw new PermissionDenied("camera");
    throw new Error(`The camera could not start: ${error.message}`);
  }
}

/** Sends the device's positions on the `/tracking` socket while started (a watch, at most one a second). While the
 * socket is down only the latest fix is kept, and it goes out when the socket connects again. */
export class PositionSender {
  /** `onDenied()` shows RDR-020's screen and resolves once access is granted again. */
  constructor(tracking, onDenied) {
    this.tracking = tracking;
    this.onDenied = onDenied;
    this.watch = null;
    this.wanted = false;
    this.lastSent = 0;
    tracking.on("connect", () => this.wanted && this.latest && this.send(this.latest));
  }

  start() {
    this.wanted = true;
    if (this.watch !== null) return;
    this.watch = navigator.geolocation.watchPosition(
      (position) => this.send(fixOf(position)),
      (error) => error.code === 1 && this.denied(),
      { enableHighAccuracy: true, maximumAge: 0 },
    );
  }

  /** A denial ends the watch: once access is granted again, watch again. */
  async denied() {
    navigator.geolocation.clearWatch(this.watch);
    this.watch = null;
    await this.onDenied();
    if (this.wanted) this.start();
  }

  /** Sends `fix` now, or (within a second of the last) once the second is over: the latest fix always goes out. */
  send(fix) {
    this.latest = fix;
    const wait = this.lastSent + 1000 - Date.now();
    if (wait > 0) {
      this.timer ??= setTimeout(() => {
        this.timer = null;
        this.send(this.latest);
      }, wait);
      return;
    }
    if (!this.tracking.connected) return;
    this.lastSent = Date.now();
    ack(this.tracking, "position", fix, 5000).catch((error) => console.warn("a position was not taken", error));
  }

  stop() {
    this.wanted = false;
    clearTimeout(this.timer);
    this.timer = null;
    if (this.watch !== null) navigator.geolocation.clearWatch(this.watch);
    this.watch = null;
  }
}

/** RDR-020's blocking screen: the message, "Go to Settings" (in a browser: where the site's permissions are), and a
 * check again. It goes away by itself when access is granted (AC-004) and stays while it is not (AC-005). */
export function permissionScreen(permission) {
  let settle;
  const done = new Promise((resolve) => (settle = resolve));
  const help = el(
    "p",
    { id: "permission-help", hidden: true, "data-test": "permission-help" },
    "Open this site's settings (the icon left of the address), allow ",
    permission === "geolocation" ? "Location" : "Camera",
    ", then come back: this screen closes by itself.",
  );
  const still = el("p", { role: "alert", "data-test": "permission-still-denied" });
  const title = permission === "geolocation" ? "Location access needed" : "Camera access needed";
  const dialog = modal(
    {
      role: "alertdialog",
      "aria-labelledby": "permission-title",
      "aria-describedby": "permission-message",
      "data-test": "permission-screen",
    },
    el("h2", { id: "permission-title" }, title),
    el("p", { id: "permission-message", "data-test": "permission-message" }, PERMISSION_MESSAGES[permission]),
    el(
      "button",
      {
        type: "button",
        "aria-label": `Go to Settings to allow ${permission === "geolocation" ? "location" : "camera"} access`,
        "data-test": "go-to-settings",
        onclick: () => {
          help.hidden = false;
          check(true);
        },
      },
      "Go to Settings",
    ),
    el(
      "button",
      { type: "button", class: "secondary", "data-test": "check-again", onclick: () => check(true) },
      "I've allowed it",
    ),
    help,
    still,
  );
  const closeDialog = openDialog(dialog);
  let status = null;
  let finished = false;
  async function check(asked) {
    const state = await permissionState(permission);
    if (state !== "denied") return finish();
    if (asked) still.textContent = "Access is still blocked.";
  }
  function finish() {
    if (finished) return;
    finished = true;
    clearInterval(poll);
    if (status) status.onchange = null;
    closeDialog();
    settle();
  }
  // Returning from the settings: the permission's change event, and a check each second in case it does not fire.
  const poll = setInterval(() => check(false), 1000);
  navigator.permissions.query({ name: permission }).then((found) => {
    status = found;
    found.onchange = () => found.state !== "denied" && finish();
  }, () => {});
  return done;
}
