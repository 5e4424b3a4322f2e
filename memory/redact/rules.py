"""What the redactor replaces and with what: the marker, and the catalogue of token formats.

Each :class:`TokenFormat` is a vendor's published credential format: a literal prefix (``dop_v1_``,
``SG.``, ``AKIA``) and a body of a known alphabet and length. The formats follow detect-secrets'
plugins (a dependency) and gitleaks' default rule set (``config/gitleaks.toml``, MIT; read, not
vendored: its regexes are Go RE2 with gitleaks' own boundaries, so each rule is written here for
Python's ``re`` and names its source). gitleaks' rules of the form "a vendor's name, ``=``, then 32
hex characters" are not copied one by one: the redactor's name stage (memory.redact.names) takes the
value of any secret-looking name, whatever the vendor. A ``source`` starting with ``ours`` has no
maintained counterpart and says why the rule exists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.redact.gate import Anchor

__all__ = ["MARKER_PREFIX", "MARKER_RE", "TOKEN_FORMATS", "TokenFormat", "inside_marker", "marker"]

MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
MARKER_PREFIX = "[REDACTED:"


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def inside_marker(text: str, pos: int) -> bool:
    """Whether ``pos`` falls inside a whole marker (not just its prefix typed into the text)."""
    start = text.rfind(MARKER_PREFIX, max(0, pos - 64), pos + 1)
    if start == -1:
        return False
    found = MARKER_RE.match(text, start)
    return found is not None and found.end() > pos


@dataclass(frozen=True, slots=True)
class TokenFormat:
    kind: str  # the marker: [REDACTED:<kind>]
    pattern: str
    anchors: tuple[Anchor, ...]
    source: str
    mixed: bool = False  # must hold a digit and an upper- and a lowercase letter ("sk-learn-…" is no key)
    after: str = ""  # a word the token may follow with no break ("bot" before a Telegram token in a URL)


def _lits(*texts: str) -> tuple[Anchor, ...]:
    return tuple(Anchor(t) for t in texts)


def _fmt(
    kind: str, pattern: str, anchors: Sequence[str | Anchor], source: str, *, mixed: bool = False, after: str = ""
) -> TokenFormat:
    found = tuple(a if isinstance(a, Anchor) else Anchor(a) for a in anchors)
    return TokenFormat(kind, pattern, found, source, mixed=mixed, after=after)


_B64 = "A-Za-z0-9+/"

TOKEN_FORMATS: tuple[TokenFormat, ...] = (
    # --- AI and developer platforms -----------------------------------------------------------------
    _fmt("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}", ["sk-ant-"], "gitleaks anthropic-api-key (any length)"),
    _fmt("openrouter-key", r"sk-or-v1-[a-f0-9]{64}", ["sk-or-v1-"], "vendor format (OpenRouter)"),
    _fmt(
        "openai-key",
        r"sk-(?!ant-|or-v1-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        ["sk-"],
        "detect-secrets OpenAIDetector, gitleaks openai-api-key; ours: project keys lost the T3BlbkFJ mark",
        mixed=True,
    ),
    _fmt("openai-key", r"sk-[a-f0-9]{32}", ["sk-"], "ours: DeepSeek-style sk-<32 hex> keys (no upper case)"),
    _fmt("groq-key", r"gsk_[A-Za-z0-9]{48,56}", ["gsk_"], "vendor format (Groq)"),
    _fmt("xai-key", r"xai-[A-Za-z0-9]{60,100}", ["xai-"], "vendor format (xAI)"),
    _fmt("replicate-token", r"r8_[A-Za-z0-9]{37}", ["r8_"], "vendor format (Replicate)"),
    _fmt("langsmith-key", r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}", ["lsv2_"], "vendor format (LangSmith)"),
    _fmt("perplexity-key", r"pplx-[A-Za-z0-9]{48}", ["pplx-"], "gitleaks perplexity-api-key"),
    _fmt("huggingface-token", r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", ["hf_", "api_org_"], "gitleaks huggingface-*"),
    _fmt("github-token", r"gh[pousr]_[A-Za-z0-9]{36,}", ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"], "gitleaks github-*"),
    _fmt("github-token", r"github_pat_[A-Za-z0-9_]{22,}", ["github_pat_"], "gitleaks github-fine-grained-pat"),
    _fmt(
        "gitlab-token",
        r"(?:glpat|gldt|glrt|glptt|glft|glimt|glagent|gloas|glsoat|glffct|glcbt)-[0-9A-Za-z_.-]{20,}"
        r"|GR1348941[0-9A-Za-z_-]{20,}",
        _lits(
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glft-",
            "glimt-",
            "glagent-",
            "gloas-",
            "glsoat-",
            "glffct-",
            "glcbt-",
            "GR1348941",
        ),
        "gitleaks gitlab-*",
    ),
    _fmt("bitbucket-token", r"ATBB[A-Za-z0-9_=.-]{32,}", ["ATBB"], "vendor format (Bitbucket app password)"),
    _fmt("atlassian-token", r"ATATT3[A-Za-z0-9_=-]{150,}", ["ATATT3"], "gitleaks atlassian-api-token"),
    _fmt("npm-token", r"npm_[A-Za-z0-9]{36}", ["npm_"], "gitleaks npm-access-token"),
    _fmt(
        "pypi-token",
        r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}",
        ["pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"],
        "detect-secrets PypiTokenDetector (and TestPyPI's prefix)",
    ),
    _fmt("rubygems-key", r"rubygems_[a-f0-9]{48}", ["rubygems_"], "gitleaks rubygems-api-token"),
    _fmt("clojars-token", r"CLOJARS_[A-Za-z0-9]{60}", ["CLOJARS_"], "gitleaks clojars-api-token"),
    _fmt("artifactory-key", r"AKCp[A-Za-z0-9]{60,}|cmVmd[A-Za-z0-9]{59}", ["AKCp", "cmVmd"], "gitleaks artifactory-*"),
    _fmt("postman-key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ["PMAK-"], "gitleaks postman-api-token"),
    _fmt("pulumi-token", r"pul-[a-f0-9]{40}", ["pul-"], "gitleaks pulumi-api-token"),
    _fmt("linear-key", r"lin_api_[A-Za-z0-9]{40}", ["lin_api_"], "gitleaks linear-api-key"),
    _fmt(
        "notion-token",
        r"ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43}",
        ["ntn_", "secret_"],
        "gitleaks notion-api-token; ours: the older secret_<43> integration tokens",
    ),
    _fmt("figma-token", r"figd_[A-Za-z0-9_-]{40}", ["figd_"], "vendor format (Figma)"),
    _fmt("readme-key", r"rdme_[a-z0-9]{70}", ["rdme_"], "gitleaks readme-api-token"),
    _fmt(
        "sourcegraph-token",
        r"sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}",
        ["sgp_"],
        "gitleaks sourcegraph-access-token",
    ),
    _fmt("prefect-key", r"pnu_[A-Za-z0-9]{36}", ["pnu_"], "gitleaks prefect-api-token"),
    _fmt("typeform-token", r"tfp_[A-Za-z0-9_.=-]{59}", ["tfp_"], "gitleaks typeform-api-token"),
    _fmt("frameio-token", r"fio-u-[A-Za-z0-9_=-]{64}", ["fio-u-"], "gitleaks frameio-api-token"),
    _fmt("infracost-key", r"ico-[A-Za-z0-9]{32}", ["ico-"], "gitleaks infracost-api-token"),
    _fmt(
        "sentry-token", r"sntryu_[a-f0-9]{64}|sntrys_[A-Za-z0-9+/=_]{50,}", ["sntryu_", "sntrys_"], "gitleaks sentry-*"
    ),
    _fmt(
        "grafana-token",
        r"glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|eyJrIjoi[A-Za-z0-9]{70,}={0,2}",
        ["glc_", "glsa_", "eyJrIjoi"],
        "gitleaks grafana-*",
    ),
    _fmt("newrelic-key", r"NR(?:AK|JS|II)-[A-Za-z0-9]{19,32}", ["NRAK-", "NRJS-", "NRII-"], "gitleaks new-relic-*"),
    _fmt("dynatrace-token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}", ["dt0c01."], "gitleaks dynatrace-api-token"),
    _fmt(
        "doppler-token",
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
        ["dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."],
        "gitleaks doppler-api-token (and Doppler's other token types)",
    ),
    _fmt("vault-token", r"hv[sb]\.[A-Za-z0-9_-]{24,}", ["hvs.", "hvb."], "gitleaks vault-*-token"),
    _fmt(
        "terraform-token",
        r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        [".atlasv1."],
        "gitleaks hashicorp-tf-api-token",
    ),
    _fmt(
        "age-secret-key",
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        ["AGE-SECRET-KEY-1"],
        "gitleaks age-secret-key",
    ),
    _fmt(
        "onepassword-token",
        r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}|A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})(?:-[A-Z0-9]{5}){3}",
        ["ops_eyJ", "A3-"],
        "gitleaks 1password-*",
    ),
    # --- clouds and hosting ----------------------------------------------------------------------------
    _fmt(
        "aws-access-key",
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}",
        ["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
        "detect-secrets AWSKeyDetector",
    ),
    _fmt("google-api-key", r"AIza[0-9A-Za-z_-]{35}", ["AIza"], "detect-secrets / gitleaks gcp-api-key"),
    _fmt("google-oauth-token", r"ya29\.[0-9A-Za-z_-]{20,}", ["ya29."], "ours: Google's OAuth access tokens"),
    _fmt("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_-]{28}", ["GOCSPX-"], "ours: Google's OAuth client secrets"),
    _fmt(
        "azure-client-secret",
        r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}",
        ["Q~"],
        "gitleaks azure-ad-client-secret",
    ),
    _fmt(
        "digitalocean-token",
        r"do[opr]_v1_[a-f0-9]{64}",
        ["dop_v1_", "doo_v1_", "dor_v1_"],
        "gitleaks digitalocean-*",
    ),
    _fmt("alibaba-key", r"LTAI[A-Za-z0-9]{12,20}", ["LTAI"], "gitleaks alibaba-access-key-id"),
    _fmt("heroku-key", r"HRKU-AA[0-9A-Za-z_-]{58}", ["HRKU-AA"], "gitleaks heroku-api-key-v2"),
    _fmt(
        "flyio-token",
        r"fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3}",
        ["fo1_", "fm1a_", "fm1r_", "fm2_"],
        "gitleaks flyio-access-token",
    ),
    _fmt("databricks-token", r"dapi[a-f0-9]{32}(?:-[0-9])?", ["dapi"], "gitleaks databricks-api-token"),
    _fmt("planetscale-token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}", ["pscale_"], "gitleaks planetscale-*"),
    _fmt("scalingo-token", r"tk-us-[A-Za-z0-9_-]{48}", ["tk-us-"], "gitleaks scalingo-api-token"),
    _fmt("openshift-token", r"sha256~[A-Za-z0-9_-]{43}", ["sha256~"], "gitleaks openshift-user-token"),
    _fmt("cloudflare-ca-key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}", ["v1.0-"], "gitleaks cloudflare-origin-ca-key"),
    _fmt(
        "harness-token",
        r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
        ["pat.", "sat."],
        "gitleaks harness-api-key",
    ),
    _fmt(
        "airtable-token",
        r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}",
        [Anchor(r"\.[a-f0-9]{64}", regex=True)],
        "gitleaks airtable-personnal-access-token",
    ),
    # --- messaging, mail, payments, commerce ----------------------------------------------------------
    _fmt(
        "slack-token",
        r"xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}",
        ["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xoxe.", "xapp-"],
        "detect-secrets SlackDetector, gitleaks slack-*",
    ),
    _fmt(
        "slack-webhook",
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+]{20,}",
        ["hooks.slack.com/"],
        "detect-secrets SlackDetector, gitleaks slack-webhook-url",
    ),
    _fmt(
        "discord-token",
        r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}",
        [Anchor(r"\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}", regex=True)],
        "detect-secrets DiscordBotTokenDetector",
    ),
    _fmt(
        "discord-webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,}",
        ["/api/webhooks/"],
        "ours: a Discord webhook URL is a bearer credential",
    ),
    _fmt(
        "teams-webhook",
        r"https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{60,}",
        ["webhook.office.com/"],
        "gitleaks microsoft-teams-webhook",
    ),
    _fmt(
        "telegram-bot-token",
        r"[0-9]{8,10}:AA[0-9A-Za-z_-]{31,40}",
        [":AA"],
        "detect-secrets TelegramBotTokenDetector",
        after="bot",
    ),
    _fmt(
        "macupos-api-key",
        r"mpk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}",
        ["mpk_"],
        "ours: the memory service's own API keys (macupos serve keys create)",
    ),
    _fmt("sendgrid-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", ["SG."], "detect-secrets SendGridDetector"),
    _fmt(
        "brevo-key",
        r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        ["xkeysib-", "xsmtpsib-"],
        "gitleaks sendinblue-api-token",
    ),
    _fmt(
        "twilio-key",
        r"(?:SK|AC)[0-9a-fA-F]{32}",
        [Anchor(r"K(?<=SK)[0-9a-fA-F]{32}", regex=True), Anchor(r"AC[0-9a-fA-F]{32}", regex=True)],
        "detect-secrets TwilioKeyDetector (the auth token after an account SID: memory.redact.redactor)",
    ),
    _fmt(
        "mailgun-key",
        r"(?:pub)?key-[0-9a-f]{32}",
        [Anchor(r"-(?<=key-)[0-9a-f]{32}", regex=True)],
        "gitleaks mailgun-private-api-token, mailgun-pub-key (without the vendor's name: the format is distinct)",
    ),
    _fmt(
        "mailgun-key",
        r"[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}",
        [Anchor(r"-[0-9a-f]{8}-[0-9a-f]{8}(?![0-9A-Za-z])", regex=True)],
        "gitleaks mailgun-signing-key (the current private key format too)",
    ),
    _fmt(
        "mailchimp-key",
        r"[0-9a-f]{32}-us[0-9]{1,2}",
        [Anchor(r"-us[0-9]{1,2}(?![0-9A-Za-z])", regex=True)],
        "detect-secrets MailchimpDetector",
    ),
    _fmt(
        "stripe-key",
        r"(?:sk|rk|pk)_(?:live|test|prod)_[0-9a-zA-Z]{10,}",
        ["k_live_", "k_test_", "k_prod_"],
        "detect-secrets StripeDetector, gitleaks stripe-access-token",
    ),
    _fmt("stripe-webhook-secret", r"whsec_[A-Za-z0-9+/=]{24,}", ["whsec_"], "ours: Stripe's webhook signing secrets"),
    _fmt(
        "square-token",
        r"(?:sq0atp|sq0csp)-[0-9A-Za-z_-]{22,60}|EAAA[A-Za-z0-9_-]{60}",
        ["sq0atp-", "sq0csp-", "EAAA"],
        "detect-secrets SquareOAuthDetector, gitleaks square-access-token",
    ),
    _fmt(
        "facebook-token",
        r"EAA[BCGM][A-Za-z0-9]{80,}",
        ["EAAB", "EAAC", "EAAG", "EAAM"],
        "gitleaks facebook-page-access-token",
    ),
    _fmt(
        "shopify-token",
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        ["shpat_", "shpca_", "shppa_", "shpss_"],
        "gitleaks shopify-*",
    ),
    _fmt("shippo-token", r"shippo_(?:live|test)_[a-fA-F0-9]{40}", ["shippo_"], "gitleaks shippo-api-token"),
    _fmt("duffel-token", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}", ["duffel_"], "gitleaks duffel-api-token"),
    _fmt("easypost-key", r"EZ[AT]K[A-Za-z0-9]{54}", ["EZAK", "EZTK"], "gitleaks easypost-*"),
    _fmt(
        "flutterwave-key",
        r"FLW(?:SECK|PUBK)(?:_TEST)?-[a-hA-H0-9]{32}-X",
        ["FLWSECK", "FLWPUBK"],
        "gitleaks flutterwave-*",
    ),
    _fmt("adobe-secret", r"p8e-[A-Za-z0-9]{32}", ["p8e-"], "gitleaks adobe-client-secret"),
    _fmt("maxmind-key", r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk", ["_mmk"], "gitleaks maxmind-license-key"),
)


# --- the gate ----------------------------------------------------------------------------------------------
