"""The API tokens tab: a login's tokens for recording runs from its own training scripts over HTTP.

A token is shown once, when created (only its sha256 is stored); the runs a script records with it belong to the
login that created it. A token may expire (the "expires in" field); the table shows when each was last used. Revoke
stops it at once, and so does removing its login from the auth file. Without logins, tokens belong to the login
``local``. See docs/integrations.md and :mod:`storage.api_tokens`.
"""

from __future__ import annotations

import html

import gradio as gr

from app.context import AppContext, actor_of
from storage import StoreError
from storage.api_tokens import parse_expiry

#: The login tokens belong to on a dashboard served without logins.
NO_LOGIN = "local"
#: The lifetimes offered for a new token (any duration such as ``12h`` may be typed).
EXPIRY_CHOICES = ["never", "1d", "7d", "30d", "90d", "365d"]

SNIPPET = """```python
from grpo_core.integrations import DashboardCallback
trainer.add_callback(DashboardCallback("{url}", token="<the token>", name="my run"))
```"""


def _login(ctx: AppContext, request: gr.Request | None) -> str:
    return actor_of(ctx, request).user or NO_LOGIN


def tokens_rows(ctx: AppContext, login: str) -> list[list]:
    """One row per token of ``login``: id, name, created, last used (UTC, to the minute), state (with its expiry)."""
    return [[t.id, t.name, f"{t.created_at:%Y-%m-%d %H:%M}",
             f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never", t.state]
            for t in ctx.store.list_api_tokens(login)]


def create_api_tokens_tab(ctx: AppContext, tab: gr.Tab) -> dict[str, gr.components.Component]:
    """Build the tab inside ``tab`` (its table is read when the tab is selected); returns its named components."""
    gr.Markdown("Record runs from your own TRL training script (any machine) into this dashboard. "
                + SNIPPET.format(url=f"http://<this dashboard's host>:{ctx.settings.port}"))
    with gr.Row():
        name = gr.Textbox(label="token name (what it is for)", value="script", scale=3, elem_id="token-name")
        expires = gr.Dropdown(label="expires in", choices=EXPIRY_CHOICES, value="90d", allow_custom_value=True,
                              scale=1, elem_id="token-expires")
        create = gr.Button("Create token", variant="primary", scale=1, elem_id="token-create")
    shown = gr.HTML(elem_id="token-shown")
    table = gr.Dataframe(headers=["id", "name", "created", "last used", "state"], interactive=False,
                         label="your tokens", elem_id="token-table")
    with gr.Row():
        token_id = gr.Number(label="token id", precision=0, scale=1, elem_id="token-revoke-id")
        revoke = gr.Button("Revoke token", variant="stop", scale=1, elem_id="token-revoke")

    def on_create(token_name: str, expires_in: str | None, request: gr.Request):
        """Inputs: token name, expires in. Outputs: the token (shown once), the token table."""
        login = _login(ctx, request)
        try:
            if ctx.logins is not None and not ctx.logins.is_live(login):
                raise StoreError(f"{login} is no longer in the auth file")
            info, plain = ctx.store.create_api_token(login, token_name or "script",
                                                     expires_in_s=parse_expiry(expires_in))
        except StoreError as exc:
            return f'<div style="color:#dc2626">{html.escape(str(exc))}</div>', tokens_rows(ctx, login)
        until = f", {info.state}" if info.expires_at else ""
        message = (f'<div>Token {info.id} ({html.escape(info.name)}{until}) for {html.escape(login)}. Copy it now: it is '
                   f'not shown again.<pre id="token-value">{html.escape(plain)}</pre></div>')
        return message, tokens_rows(ctx, login)

    def on_revoke(number: float | None, request: gr.Request):
        """Inputs: token id. Outputs: a message, the token table."""
        login = _login(ctx, request)
        try:
            info = ctx.store.revoke_api_token(int(number or 0), login=login)
        except StoreError as exc:
            return f'<div style="color:#dc2626">{html.escape(str(exc))}</div>', tokens_rows(ctx, login)
        return f"<div>Token {info.id} ({html.escape(info.name)}) is revoked.</div>", tokens_rows(ctx, login)

    def on_load(request: gr.Request):
        return tokens_rows(ctx, _login(ctx, request))

    create.click(on_create, inputs=[name, expires], outputs=[shown, table])
    revoke.click(on_revoke, inputs=[token_id], outputs=[shown, table])
    tab.select(on_load, outputs=[table])
    return {"name": name, "expires": expires, "create": create, "shown": shown, "table": table, "token_id": token_id, "revoke": revoke}
