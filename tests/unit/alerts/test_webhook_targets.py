"""Where webhooks may go (:mod:`grpo_core.alerts.targets`): every spelling of an internal address refused with the
reason (decimal, hex, short and IPv4-mapped forms, loopback names, userinfo tricks, names that resolve inside),
the dashboard itself always, an admin's allowed hosts let through; a POST connects to the address it checked, does
not follow a redirect (to loopback or anywhere) and never shows the answer's body; who may set a run's own URL.

The HTTP servers are real, on 127.0.0.1; names are resolved by a stub (tests run offline)."""

from __future__ import annotations

import ipaddress

import pytest

from app.views.runs import run_status_html
from grpo_core.alerts import targets as webhook_targets
from grpo_core.alerts.targets import (
    WebhookDeliveryError,
    WebhookPolicy,
    WebhookRefused,
    check_destination,
    check_launch_webhooks,
    may_set_run_webhook,
    post_json,
)
from grpo_core.alerts.webhooks import Notifier, webhook_url
from grpo_core.settings import load_settings
from storage import RunStatus
from tests.receivers import RecordingServer

NAMES = {
    "hooks.example.com": ["93.184.215.14"],
    "rebind.example.com": ["127.0.0.1"],
    "metadata.example.com": ["169.254.169.254"],
    "split.example.com": ["93.184.215.14", "10.1.2.3"],
    "mapped.example.com": ["::ffff:192.168.0.1"],
    "relay.internal": ["10.20.30.40"],
    "hooks.test": ["127.0.0.1"],
}


def stub_resolver(host, port):
    return NAMES[host]


REFUSED = [
    ("http://127.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://2130706433/", "2130706433 means 127.0.0.1, which is a loopback address; an admin may allow it with "
                           "--webhook-allow-host 127.0.0.1"),
    ("http://0x7f.1/", "0x7f.1 means 127.0.0.1, which is a loopback address"),
    ("http://0x7f000001/", "a loopback address"),
    ("http://127.1:8080/", "a loopback address"),
    ("http://017700000001/", "a loopback address"),
    ("http://[::1]/", "a loopback address"),
    ("http://[::ffff:127.0.0.1]/", r"a loopback address \(127.0.0.1\) inside an IPv6 address"),
    ("http://[::ffff:7f00:1]/", "a loopback address"),
    ("http://[64:ff9b::7f00:1]/", "inside an IPv6 address"),
    ("http://[2002:c0a8:1::]/", r"a private-network address \(192.168.0.1\) inside an IPv6 address"),
    ("http://[::127.0.0.1]/", "a reserved address"),
    ("http://localhost/", "localhost is this machine"),
    ("http://localhost./", "localhost is this machine"),
    ("http://LocalHost:9000/x", "localhost is this machine"),
    ("http://api.localhost/", "api.localhost is this machine"),
    ("http://evil.com@127.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://user:pw@[::1]:81/", "a loopback address"),
    ("http://0.0.0.0/", "an unspecified address"),
    ("http://0/", "an unspecified address"),
    ("http://[::]/", "an unspecified address"),
    ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
    ("http://[fe80::1]/", "a link-local address"),
    ("http://10.0.0.1/", "a private-network address"),
    ("http://172.16.5.4/", "a private-network address"),
    ("http://192.168.1.1/", "a private-network address"),
    ("http://[fd00::1]/", "a private-network address"),
    ("http://100.64.0.1/", "not a public address"),
    ("http://224.0.0.1/", "a multicast address"),
    ("http://[ff0e::1]/", "a multicast address"),
    ("http://255.255.255.255/", "a private-network address|a reserved address"),
    ("http://240.0.0.1/", "a private-network address|a reserved address"),
    ("http://rebind.example.com/", "rebind.example.com resolves to 127.0.0.1, which is a loopback address"),
    ("http://metadata.example.com/", "resolves to 169.254.169.254, which is a link-local address"),
    ("http://split.example.com/", "resolves to 10.1.2.3, which is a private-network address"),
    ("http://mapped.example.com/", "inside an IPv6 address"),
    ("ftp://hooks.example.com/", "only http and https URLs are allowed"),
    ("file:///etc/passwd", "only http and https URLs are allowed"),
    ("gopher://127.0.0.1:6379/_FLUSHALL", "only http and https URLs are allowed"),
    ("javascript:alert(1)", "only http and https URLs are allowed"),
    ("http:///hook", "has no host"),
    ("http://0177.0.0.1/", "not a valid URL"),
]


@pytest.mark.parametrize(("url", "reason"), REFUSED)
def test_internal_destinations_are_refused_with_the_reason(url, reason):
    with pytest.raises(WebhookRefused, match=reason) as caught:
        check_destination(url, WebhookPolicy(), resolver=stub_resolver)
    assert str(caught.value).startswith("webhook URL")


def test_public_destinations_pass_and_the_address_to_connect_to_is_the_one_checked():
    destination = check_destination("https://hooks.example.com/x", WebhookPolicy(), resolver=stub_resolver)
    assert destination.address == ipaddress.ip_address("93.184.215.14") and destination.port == 443
    assert check_destination("http://93.184.215.14:8080/", WebhookPolicy()).port == 8080


def test_an_address_of_this_machine_is_refused(monkeypatch):
    monkeypatch.setattr(webhook_targets, "_machine_addresses",
                        lambda: frozenset({ipaddress.ip_address("93.184.215.14")}))
    with pytest.raises(WebhookRefused, match="is an address of this machine"):
        check_destination("http://hooks.example.com/", WebhookPolicy(), resolver=stub_resolver)


def test_an_admin_may_allow_hosts_but_never_the_dashboard_itself():
    policy = WebhookPolicy(allow_hosts=("127.0.0.1", "10.0.0.0/8", "Relay.Internal."), dashboard_port=7860)
    assert check_destination("http://127.0.0.1:9000/", policy).port == 9000
    assert check_destination("http://10.9.8.7/", policy).address == ipaddress.ip_address("10.9.8.7")
    assert check_destination("http://relay.internal/", policy, resolver=stub_resolver).address is not None
    with pytest.raises(WebhookRefused, match="192.168.1.1 is a private-network address; an admin may allow it "
                                             "with --webhook-allow-host 192.168.1.1"):
        check_destination("http://192.168.1.1/", policy)
    for url in ("http://127.0.0.1:7860/gradio_api/call/delete_run", "http://2130706433:7860/",
                "http://[::ffff:127.0.0.1]:7860/", "http://0.0.0.0:7860/"):
        with pytest.raises(WebhookRefused, match="is the dashboard itself"):
            check_destination(url, policy)
    with pytest.raises(WebhookRefused, match="localhost is this machine"):
        check_destination("http://localhost:9000/", policy)  # the name was not allowed, only the address
    assert check_destination("http://localhost:9000/", WebhookPolicy(allow_hosts=("localhost",))).port == 9000


def test_launch_time_checks_need_no_dns():
    policy = WebhookPolicy()
    check_launch_webhooks(["", "https://hooks.example.com/x", "http://not-resolvable.invalid/"], policy,
                          user=None, is_admin=False)
    for url in ("http://2130706433/", "http://localhost./", "ftp://x.example.com/"):
        with pytest.raises(WebhookRefused, match="^webhook_url: webhook URL"):
            check_launch_webhooks([url], policy, user=None, is_admin=False)


def test_who_may_set_a_runs_own_url():
    admins = {"carol"}
    assert may_set_run_webhook(WebhookPolicy(run_webhooks="all"), "alice", admins)
    assert not may_set_run_webhook(WebhookPolicy(run_webhooks="admins"), "alice", admins)
    assert may_set_run_webhook(WebhookPolicy(run_webhooks="admins"), "carol", admins)
    assert may_set_run_webhook(WebhookPolicy(run_webhooks="admins"), None, admins)  # single-user / before logins
    assert not may_set_run_webhook(WebhookPolicy(run_webhooks="none"), "carol", admins)
    with pytest.raises(WebhookRefused, match="only admins may set a run's own webhook_url .--run-webhooks admins"):
        check_launch_webhooks(["https://hooks.example.com/"], WebhookPolicy(run_webhooks="admins"),
                              user="alice", is_admin=False)
    check_launch_webhooks(["https://hooks.example.com/"], WebhookPolicy(run_webhooks="admins"),
                          user="carol", is_admin=True)


def test_settings_and_the_policy_they_give(tmp_path, monkeypatch):
    single = load_settings(data_dir=tmp_path, webhook_url="http://127.0.0.1:5000/alerts")
    policy = WebhookPolicy.from_settings(single)
    assert policy.run_webhooks == "all" and "127.0.0.1" in policy.allow_hosts  # the admin's own URL is allowed
    shared = single.with_overrides(auth=(("alice", "a"), ("carol", "c")), admins=frozenset({"carol"}))
    assert WebhookPolicy.from_settings(shared).run_webhooks == "admins"
    monkeypatch.setenv("GRPO_WEBHOOK_ALLOW_HOSTS", "relay.internal, 10.0.0.0/8")
    monkeypatch.setenv("GRPO_RUN_WEBHOOKS", "ALL")
    from_env = load_settings(data_dir=tmp_path)
    assert from_env.webhook_allow_hosts == ("relay.internal", "10.0.0.0/8") and from_env.run_webhooks == "all"
    assert load_settings(data_dir=tmp_path, webhook_allow_hosts=["::1"]).webhook_allow_hosts == ("::1",)
    with pytest.raises(ValueError, match="not a host name, an IP address or a CIDR network"):
        load_settings(data_dir=tmp_path, webhook_allow_hosts=["http://x/"])
    with pytest.raises(ValueError, match="one of all, admins, none"):
        load_settings(data_dir=tmp_path, run_webhooks="everyone")


def test_the_cli_flags(tmp_path):
    from app.cli.main import build_parser

    args = build_parser().parse_args(["serve", "--webhook-allow-host", "a.internal", "--webhook-allow-host",
                                      "10.0.0.0/8", "--run-webhooks", "none"])
    assert args.webhook_allow_host == ["a.internal", "10.0.0.0/8"] and args.run_webhooks == "none"


@pytest.fixture
def server_factory():
    servers = []

    def make(**kwargs):
        servers.append(RecordingServer(**kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def test_a_refused_destination_gets_nothing(server_factory):
    target = server_factory()
    for url in (f"http://127.0.0.1:{target.port}/", f"http://2130706433:{target.port}/",
                f"http://0x7f.1:{target.port}/", f"http://[::ffff:127.0.0.1]:{target.port}/",
                f"http://evil@127.0.0.1:{target.port}/", f"http://localhost.:{target.port}/"):
        with pytest.raises(WebhookRefused):
            post_json(url, {"event": "completed"}, WebhookPolicy())
    assert target.requests == []


def test_the_post_goes_to_the_checked_address_with_the_name_as_host(server_factory):
    """``hooks.test`` resolves (by the stub, once) to 127.0.0.1, which the admin allowed by name: the POST reaches
    the server although the system cannot resolve that name, and carries the name in its Host header."""
    target = server_factory()
    calls = []

    def resolver(host, port):
        calls.append(host)
        return stub_resolver(host, port)

    post_json(f"http://hooks.test:{target.port}/hook?x=1", {"event": "completed"},
              WebhookPolicy(allow_hosts=("hooks.test",)), resolver=resolver)
    assert target.requests == [("POST", "/hook?x=1", f"hooks.test:{target.port}")]
    assert calls == ["hooks.test"]


def test_redirects_are_not_followed_and_bodies_not_shown(server_factory):
    inside = server_factory()
    redirecting = server_factory(status=302, headers=[("Location", f"http://127.0.0.1:{inside.port}/steal")])
    policy = WebhookPolicy(allow_hosts=("hooks.test",))
    with pytest.raises(WebhookDeliveryError, match=r"redirect \(HTTP 302\); redirects are not followed") as caught:
        post_json(f"http://hooks.test:{redirecting.port}/", {"event": "x"}, policy, resolver=stub_resolver)
    assert "SECRET" not in str(caught.value) and str(inside.port) not in str(caught.value)
    for status in (307, 308, 301):
        hop = server_factory(status=status, headers=[("Location", f"http://127.0.0.1:{inside.port}/")])
        with pytest.raises(WebhookDeliveryError, match=f"HTTP {status}"):
            post_json(f"http://hooks.test:{hop.port}/", {"event": "x"}, policy, resolver=stub_resolver)
    assert inside.requests == []
    failing = server_factory(status=500)
    with pytest.raises(WebhookDeliveryError, match="the webhook answered HTTP 500$"):
        post_json(f"http://hooks.test:{failing.port}/", {"event": "x"}, policy, resolver=stub_resolver)


def _finished_with_webhook(store, settings, url: str):
    """A run with ``url`` as its webhook, completed, its alert delivered (or refused) by a notifier: the run read
    back."""
    run = store.create_run(name="probe", config={"webhook_url": url}, dataset_id=None, max_steps=1, owner=None)
    store.claim_run(run.id, worker_pid=None)
    store.finish_run(run.id, RunStatus.COMPLETED)
    notifier = Notifier(store, settings, backoff_s=0.01)
    notifier.check()
    assert notifier.wait_idle(10)
    return store.get_run(run.id)


def test_the_notifier_records_a_refusal_without_sending_and_the_card_shows_why(store, settings, server_factory):
    target = server_factory(status=200)
    after = _finished_with_webhook(store, settings, f"http://127.0.0.1:{target.port}/")
    assert target.requests == []
    assert after.alert_error.startswith("webhook message completed@") and "not sent: webhook URL" in after.alert_error
    assert "is a loopback address; an admin may allow it with --webhook-allow-host 127.0.0.1" in after.alert_error
    card = run_status_html(after)
    assert "loopback" in card and "200" not in after.alert_error and "SECRET" not in card


def test_a_logins_own_url_is_ignored_unless_permitted(store, settings):
    shared = settings.with_overrides(auth=(("alice", "a"), ("carol", "c")), admins=frozenset({"carol"}),
                                     webhook_url="https://hooks.example.com/team")
    alices = store.create_run(name="a", config={"webhook_url": "https://alice.example.com/"}, dataset_id=None,
                              max_steps=1, owner="alice")
    carols = store.create_run(name="c", config={"webhook_url": "https://carol.example.com/"}, dataset_id=None,
                              max_steps=1, owner="carol")
    assert webhook_url(alices, shared) == "https://hooks.example.com/team"  # the admin's URL, not hers
    assert webhook_url(carols, shared) == "https://carol.example.com/"
    assert webhook_url(alices, shared.with_overrides(run_webhooks="all")) == "https://alice.example.com/"
    assert webhook_url(carols, shared.with_overrides(run_webhooks="none")) == "https://hooks.example.com/team"


def test_the_launch_handlers_check_the_handlers_login(settings):
    """``app.context.check_webhooks``, which the API's launch_run and launch_sweep and the Launch tab's run and
    sweep buttons call with Gradio's request: the login's permission, then the destination."""
    from types import SimpleNamespace

    from app.context import check_webhooks

    ctx = SimpleNamespace(settings=settings.with_overrides(auth=(("alice", "a"), ("carol", "c")),
                                                           admins=frozenset({"carol"})),
                          logins=None)  # no auth file: the logins are the settings'
    alice, carol = SimpleNamespace(username="alice"), SimpleNamespace(username="carol")
    check_webhooks(ctx, alice, ["", None])
    with pytest.raises(WebhookRefused, match="only admins may set"):
        check_webhooks(ctx, alice, ["", "https://hooks.example.com/"])
    check_webhooks(ctx, carol, ["https://hooks.example.com/"])
    with pytest.raises(WebhookRefused, match="a loopback address"):
        check_webhooks(ctx, carol, ["https://hooks.example.com/", "http://[::1]:9000/"])
    check_webhooks(SimpleNamespace(settings=settings, logins=None), None, ["https://hooks.example.com/"])  # single-user


def test_a_refusal_on_the_card_names_the_webhooks_host_never_its_path(store, settings, server_factory):
    """The status card (the Runs tab's and the run's page) is shown to every login, and a webhook's address is its
    owner's credential (a Slack URL's path, a ``?token=``): a message refused at delivery (a name resolving to an
    internal address, which the launch does not resolve) recorded the whole URL as the run's ``alert_error``
    (round six). It names the scheme and host only now."""
    target = server_factory(status=200)
    secret_url = f"http://127.0.0.1:{target.port}/services/T0001/B0002/SECRETPATH?token=SECRETQUERY#SECRETFRAG"
    after = _finished_with_webhook(store, settings, secret_url)
    assert target.requests == [] and "loopback" in after.alert_error
    assert f"http://127.0.0.1:{target.port}/" in after.alert_error  # where it was going, still said
    card = run_status_html(after)
    assert "SECRET" not in after.alert_error and "SECRET" not in card
