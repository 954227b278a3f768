import { useState } from "preact/hooks";

/** The sign-in form: an API key, kept in this tab's session storage once accepted. */
export function SignIn(props: { onSubmit: (key: string) => Promise<boolean>; error: string | null }) {
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="sign-in"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        if (await props.onSubmit(key.trim())) setKey("");
        setBusy(false);
      }}
    >
      <h2>Sign in</h2>
      <p>
        Use an API key of this server (<code>spool keys create</code>). A read-only key sees everything and changes nothing. The key stays
        in this browser tab only.
      </p>
      <label for="api-key">API key</label>
      <input
        id="api-key"
        name="api-key"
        type="password"
        autocomplete="off"
        required
        value={key}
        onInput={(e) => setKey(e.currentTarget.value)}
      />
      <button type="submit" disabled={busy || !key.trim()}>
        Sign in
      </button>
      {props.error && (
        <p role="alert" class="error">
          {props.error}
        </p>
      )}
    </form>
  );
}
