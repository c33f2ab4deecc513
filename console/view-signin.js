// Sign in: paste a bearer token, or OpenID Connect when the deployment configures it.
import { authMode, signInWithToken, startOidcSignIn } from "./auth.js";
import { h, notify } from "./dom.js";

export function signInView(main, done) {
  if (authMode() === "oidc") {
    main.append(h("section.card", { "aria-labelledby": "signin-title" },
      h("h1#signin-title", {}, "Sign in"),
      h("p", {}, "You sign in with your organisation's identity provider."),
      h("button.primary", { type: "button", on: { click: () => startOidcSignIn().catch((e) => notify(e.message, "error")) } },
        "Sign in")));
    return;
  }
  const input = h("textarea#token", { name: "token", rows: 4, required: true, autocomplete: "off",
    spellcheck: "false", "aria-describedby": "token-help" });
  const error = h("p.field-error#token-error", { role: "alert" });
  const form = h("form.card#signin", { "aria-labelledby": "signin-title", novalidate: true,
    on: { submit: (event) => {
      event.preventDefault();
      try {
        signInWithToken(input.value);
        done();
      } catch (e) {
        error.textContent = e.message;
        input.setAttribute("aria-invalid", "true");
      }
    } } },
    h("h1#signin-title", {}, "Sign in"),
    h("label", { for: "token" }, "Bearer token"),
    input,
    error,
    h("p.help#token-help", {}, "Locally, make one with ", h("code", {}, "duetime token --tenant <you>"),
      " (operators: add ", h("code", {}, "--scope duetime/operator"), "). ",
      "It is kept in this tab's session storage only, and sent to the duetime API alone."),
    h("button.primary", { type: "submit" }, "Sign in"));
  main.append(form);
  input.focus();
}
