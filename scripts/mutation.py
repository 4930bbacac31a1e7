"""Mutation testing of the domain packages with mutmut; not in CI (a package takes from tens of
minutes to hours on a shared machine). docs/testing.md says how to read the result and records
the last scores.

    .venv/bin/python scripts/mutation.py                  every package, smallest first
    .venv/bin/python scripts/mutation.py audit identity   those packages only
    .venv/bin/python scripts/mutation.py --resume money   go on with an interrupted run
    .venv/bin/python scripts/mutation.py --retry money    run the survivors again (new tests)
    .venv/bin/python scripts/mutation.py --retry notices --tests tests/unit/test_notice_render.py
                                                          ... against those tests only (faster)
    .venv/bin/python scripts/mutation.py --report         the last runs' scores, no new run
    .venv/bin/python scripts/mutation.py --fresh money    start over, ignoring the record

Each package runs in a scratch copy of this checkout of its own, `.mutation/<package>/`
(git-ignored), because mutmut 3 reads its settings from `[tool.mutmut]` in the pyproject.toml of
the directory it runs in and keeps its state in `mutants/` there: the copy's pyproject.toml gets
the package's section (the files to mutate, the tests that cover them), so packages never share
or invalidate each other's results and the checkout itself is never touched. A run starts from a
fresh copy unless --resume or --retry is given.

A run outlasts a working session (hours per package), and the copy does not outlive the
checkout, so each verdict is also written to the package's record, `scripts/mutation-record/
<package>.json` (tracked: commit it with the tests that earned it), every minute while mutmut
runs. A fresh copy starts from the record: mutmut keeps a verdict while the text of the mutated
function is unchanged (its hash in the record) and checks every mutant of a changed or new
function again, as it does between two runs in one copy. --resume and --retry start from the
record too where the checkout holds no copy yet; --fresh ignores it. A verdict
kept from an earlier run does not see tests added since: --retry runs the survivors again,
and --retry --tests runs them against the tests named only, far quicker where a survivor's
covering tests are many (a survivor runs every one): a mutant those tests kill is killed, one they
do not keeps its verdict.

mutmut runs at the lowest priority (nice 19) with --workers workers (default 2: the machine is
shared). It first runs the package's selection once, recording which tests execute which
function, then runs each mutant against only the tests that executed the mutated function,
stopping at the first failure. The tests need PostgreSQL (and Azurite for the notices) as
./scripts/test.sh starts them; start them first.

A mutant no test kills is either killed by a new behavioural test or listed in EQUIVALENT with
the reason it cannot change what the product does; the score is killed / (mutants - equivalent),
a timeout counting as killed (the suite notices a hang). Exit 0 when every package scored here
reaches GOAL, 1 when one does not, 2 when mutmut itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / ".mutation"
RECORD = ROOT / "scripts" / "mutation-record"
VENV_BIN = ROOT / ".venv" / "bin"
GOAL = 0.90

# The tests that cover each package, smallest package first: its own unit and integration tests
# on SQLite and PostgreSQL, and the HTTP tests that reach it through the app.
TESTS: dict[str, list[str]] = {
    "audit": [
        "tests/unit/test_audit_chain_hash.py",
        "tests/unit/test_audit_row_identity.py",
        "tests/integration/audit",
    ],
    "identity": [
        "tests/unit/test_identity_operations.py",
        "tests/unit/test_identity_v3_hash_vectors.py",
        "tests/unit/test_local_tokens.py",
        "tests/unit/test_secret_hash_headers.py",
        "tests/integration/identity",
    ],
    "notices": [
        "tests/unit/test_notice_claim_sql.py",
        "tests/unit/test_notice_relay_loop.py",
        "tests/unit/test_notice_render.py",
        "tests/unit/test_function_relay_host.py",
        "tests/integration/notices",
        "tests/integration/faults/test_notice_mark_after_a_cut.py",
        "tests/integration/hosts/test_runner_matrix.py",
        "tests/integration/hosts/test_telemetry.py",
        "tests/integration/http/test_readiness.py",
    ],
    "money": [
        "tests/unit/test_applock_sql.py",
        "tests/unit/test_daily_limit_options.py",
        "tests/unit/test_key_claim_sql.py",
        "tests/unit/test_money_amounts.py",
        "tests/unit/test_refusals_declared_once.py",
        "tests/unit/test_request_hash_vector.py",
        "tests/unit/test_transfer_write_sql.py",
        "tests/integration/money",
        "tests/integration/http",
        "tests/integration/db/test_same_answers_on_every_dialect.py",
    ],
}

# Surviving mutants that cannot change what the product does, by mutmut's name, with the
# reason (docs/testing.md lists the same). A name is `module.x_function__mutmut_N`, a method's
# `module.xǁClassǁmethod__mutmut_N`; N is stable while the function's text is.
_NO_OP_MASK = "the 48-bit mask is a no-op for every instant a datetime holds (year 9999 < 2**48 ms)"
_EVERY_DIALECT = (
    "the label names a dialect with no tail lock, and the table holds one for each dialect"
    " shared.db.engine builds"
)
_SQLITE_LOCK = (
    "any UPDATE takes SQLite's writer lock, matching rows or not, and the tail table has one row"
)
_SETTINGS_VALIDATED = "Settings already refused a key that is not strict base64 (the same check)"
_FETCH_LOGS_THE_TYPE = "a failed JWKS fetch logs the exception's type only, never its message"
_PYJWK_CLIENT_TRUTH = "PyJWKClient tests its cache flags for truth: None and False disable alike"
# The ORM leaves a None (or an omitted value) out of the INSERT, so the column's default applies.
_NOTICE_ID_DEFAULT = "SubscriberNotices.Id defaults to a fresh uuid4 when none is given"
_ACCOUNT_DEFAULT = "the column's default is the value given (Id uuid4, EUR, not deleted, Version 1)"
_USER_DEFAULT = "the column's default is the value given (False, False, True, 0 and 0 failures)"
_REQUIRE_REDUNDANT = (
    "PyJWT refuses a token without iss or aud whenever an issuer and an audience are given (always,"
    " here), and _check_times and tokens.user_id refuse one without exp or sub"
)
_SYNC_NONE = "SQLAlchemy takes no synchronisation step for None, as for False"
_NO_SESSION_SYNC = f"{_SYNC_NONE} (and the session holds no AspNetUser object to synchronise)"
EQUIVALENT: dict[str, str] = {
    "shared.audit.chain.x__field__mutmut_17": "'>i' and '>I' pack every length below 2**31 alike",
    "shared.audit.chain.x__field__mutmut_8": "'UTF-8' and 'utf-8' name one codec",
    "shared.audit.chain.xǁAuditChainǁfrom_settings__mutmut_17": _SETTINGS_VALIDATED,
    "shared.audit.chain.xǁAuditChainǁfrom_settings__mutmut_18": _SETTINGS_VALIDATED,
    "shared.audit.chain.x_uuid7__mutmut_7": _NO_OP_MASK,
    "shared.audit.chain.x_uuid7__mutmut_8": _NO_OP_MASK,
    "shared.audit.chain.x_uuid7__mutmut_9": _NO_OP_MASK,
    "shared.audit.chain.x_uuid7__mutmut_15": "int.from_bytes is big-endian by default",
    "shared.audit.chain.x_uuid7__mutmut_17": "an 11th random byte lands in no kept bit",
    "shared.audit.tail_sql.x_lock_and_read_tail__mutmut_4": _EVERY_DIALECT,
    "shared.audit.tail_sql.x_lock_and_read_tail__mutmut_8": _EVERY_DIALECT,
    "shared.audit.tail_sql.x_lock_and_read_tail__mutmut_9": _EVERY_DIALECT,
    "shared.audit.tail_sql.x_mssql_tail_lock__mutmut_6": (
        "the hint without dialect_name applies on every dialect, and only SQL Server compiles it"
    ),
    "shared.audit.tail_sql.x_sqlite_writer_lock__mutmut_2": _SQLITE_LOCK,
    "shared.audit.tail_sql.x_sqlite_writer_lock__mutmut_4": _SQLITE_LOCK,
    "shared.audit.verify.x__rows__mutmut_7": "one batch of every row walks the same rows in order",
    "shared.identity.pin_service.xǁPinChangesǁ_write__mutmut_27": _NO_SESSION_SYNC,
    "shared.identity.pin_service.xǁPinChangesǁ_write__mutmut_44": _NOTICE_ID_DEFAULT,
    "shared.identity.pin_service.xǁPinChangesǁ_write__mutmut_49": _NOTICE_ID_DEFAULT,
    "shared.identity.passwords.x_hash_secret__mutmut_19": "'UTF-8' and 'utf-8' name one codec",
    "shared.identity.passwords.x_hash_secret__mutmut_32": (
        "'>biii' and '>BIII' pack every value written alike (format 1, PRF 2, a 16-byte salt, an"
        " iteration count below 2**31)"
    ),
    "shared.identity.passwords.x_hash_secret__mutmut_38": "'ASCII' and 'ascii' name one codec",
    "shared.identity.passwords.x_verify_secret__mutmut_15": (
        "a count read signed differs only from 2**31 up, refused either way (MAX_ITERATIONS)"
    ),
    "shared.identity.passwords.x_verify_secret__mutmut_55": "'UTF-8' and 'utf-8' name one codec",
    "shared.identity.pins.x__count_attempt__mutmut_6": (
        "`NULL <= now` is never true in SQL, so a missing lockout end is not lapsed either way"
    ),
    "shared.identity.pins.x__count_attempt__mutmut_21": _NO_SESSION_SYNC,
    "shared.identity.pins.x__count_attempt__mutmut_44": "a CASE without ELSE is NULL, as ELSE NULL",
    "shared.identity.pins.x__count_attempt__mutmut_46": "a CASE without ELSE is NULL, as ELSE NULL",
    "shared.identity.pins.x__reserve_attempt__mutmut_34": (
        "a lockout ending at `now` has lapsed, so the reservation counted the attempt and returned"
        " before this comparison (its UPDATE's `PinLockoutEnd <= now` is the complement)"
    ),
    "shared.identity.pins.x__reserve_attempt__mutmut_40": _NO_SESSION_SYNC,
    "shared.identity.users.x_add_user__mutmut_20": _ACCOUNT_DEFAULT,
    "shared.identity.users.x_add_user__mutmut_24": _ACCOUNT_DEFAULT,
    "shared.identity.users.x_add_user__mutmut_25": _ACCOUNT_DEFAULT,
    "shared.identity.users.x_add_user__mutmut_27": _ACCOUNT_DEFAULT,
    "shared.identity.users.x_add_user__mutmut_28": _ACCOUNT_DEFAULT,
    "shared.identity.users.x_add_user__mutmut_32": _ACCOUNT_DEFAULT,
    "shared.identity.users.x_add_user__mutmut_33": _ACCOUNT_DEFAULT,
    "shared.identity.users.x_add_user__mutmut_35": _ACCOUNT_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_10": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_11": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_12": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_13": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_15": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_25": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_26": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_27": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_28": _USER_DEFAULT,
    "shared.identity.users.x__identity_row__mutmut_30": _USER_DEFAULT,
    "shared.identity.tokens.x_issue_token__mutmut_37": "PyJWT signs with HS256 under a text key",
    "shared.identity.tokens.xǁTokenVerifierǁ_decode__mutmut_32": _REQUIRE_REDUNDANT,
    "shared.identity.tokens.xǁTokenVerifierǁ_decode__mutmut_33": _REQUIRE_REDUNDANT,
    "shared.identity.tokens.xǁTokenVerifierǁverify__mutmut_1": (
        "an empty token fails to decode, and a host with no key refuses in _decode: InvalidToken"
        " either way"
    ),
    "shared.identity.tokens.xǁTokenVerifierǁ__init____mutmut_19": (
        "Settings refuse Auth__SigningKey where Auth__JwksUrl is set, so it is None there anyway"
    ),
    "shared.identity.jwks.x__signing_keys__mutmut_3": (
        "PyJWKClient.fetch_data refuses a payload that is not a JSON object before it is read"
    ),
    "shared.identity.jwks.x__signing_keys__mutmut_8": _FETCH_LOGS_THE_TYPE,
    "shared.identity.jwks.x__signing_keys__mutmut_9": _FETCH_LOGS_THE_TYPE,
    "shared.identity.jwks.x__signing_keys__mutmut_10": _FETCH_LOGS_THE_TYPE,
    "shared.identity.jwks.x__signing_keys__mutmut_11": _FETCH_LOGS_THE_TYPE,
    "shared.identity.jwks.xǁJwksKeysǁ__init____mutmut_4": _PYJWK_CLIENT_TRUTH,
    "shared.identity.jwks.xǁJwksKeysǁ__init____mutmut_5": _PYJWK_CLIENT_TRUTH,
    "shared.identity.jwks.xǁJwksKeysǁ__init____mutmut_9": (
        "PyJWKClient's cache_keys is False unless given"
    ),
    "shared.identity.jwks.xǁJwksKeysǁ__init____mutmut_12": (
        "the key cache wraps PyJWKClient.get_signing_key, which JwksKeys never calls (fetch_data)"
    ),
}
# The notices' (and the money's) equivalent mutants, apart from the other packages' so that
# each package's list reads alone.
_IMPORT_TIME = (
    "runs only while shared.notices.render imports, before mutmut activates a mutant; the"
    " byte-for-byte render tests pin the headers it parses"
)
_OWN_NAME = "a header parsed once folds under its own name: the key's case is never written"
_ONE_ROW = "`.first()` reads one row whatever the LIMIT"
_FREE_SUM = "a SUM of 1 or NULL counts the same rows, and one of no row reads 0 through `free or 0`"
_RELEASED = (
    "the release just cleared every owed row leased under this runner's name: excluding it"
    " leaves nothing out"
)
_OVERWRITE = "upload_blob's overwrite defaults to False, and None is as false"
_TSQL_KEYWORDS = "T-SQL keywords and type names are case-insensitive"
_NEVER_READ = (
    "caught inside run_keyed, which logs a line of its own: the exception's text is never read"
)
_RECEIPT_UNREAD = "no caller reads an outcome's receipt: the mark stores it, the log line names it"
_CLAIM_CACHE = "the claim statement is built the same every time: the cache saves only the build"
_CLAIM_BINDS = "every execution of the claim binds now and lease_until, over the built defaults"
_BY_TYPE = "readiness reports a failing probe by its exception's type only, never its text"
_PROBE_NAME = (
    "the probe's file is removed at once, and no prefix makes a name a notice or a leftover"
    " removal uses"
)
EQUIVALENT |= {
    "shared.notices.claim_sql.x__mssql__mutmut_6": (
        "_mssql builds SQL Server's claim only, so a hint for every dialect is SQL Server's alone"
    ),
    "shared.money.applock_sql.x_mssql_applock_batch__mutmut_3": _TSQL_KEYWORDS,
    "shared.money.applock_sql.x_mssql_applock_batch__mutmut_5": _TSQL_KEYWORDS,
    "shared.money.applock_sql.x_mssql_applock_batch__mutmut_19": _TSQL_KEYWORDS,
    **{f"shared.money.idempotency.xǁCommitLostǁ__init____mutmut_{n}": _NEVER_READ for n in (3, 4)},
    **{
        f"shared.money.applock_sql.x_postgresql_advisory_lock__mutmut_{n}": (
            "PostgreSQL keywords and unquoted function names are case-insensitive"
        )
        for n in (3, 4, 6, 9)
    },
    "shared.money.transfer_write_sql.x_one_statement_per_write__mutmut_6": (
        "the balances matched are compared with 2 only, and the batch stops at the first write"
        " that matched nothing, so a first write that failed counts 1 or 0 alike: not 2"
    ),
    "shared.money.transfer_write_sql.x_one_statement_per_write__mutmut_24": (
        "typing.cast returns its value unchanged whatever type it names"
    ),
    "shared.money.idempotency.x_store_success__mutmut_2": _SYNC_NONE,
    **{
        f"shared.money.idempotency.x_request_hash__mutmut_{n}": (
            "every value hashed is JSON already (the body's model_dump(mode='json') and the"
            " amounts as canonical strings), so json.dumps never calls its default"
        )
        for n in (10, 14)
    },
    **{
        f"shared.money.{name}__mutmut_{n}": (
            "the label only names the choice in the error for a dialect the table lacks, and the"
            " table holds every dialect shared.db.engine builds"
        )
        for name, numbers in (
            ("applock_sql.x_take_daily_limit_lock", (9, 13, 14)),
            ("transfer_write_sql.x_write_transfer", (7, 11, 12)),
            ("key_claim_sql.x_claim_statement", (3, 7, 8)),
        )
        for n in numbers
    },
    "shared.money.accounts.x_in_lock_order__mutmut_4": (
        "the two accounts of a transfer are never one (the payee is another user), so their Ids"
        " are never equal and < orders them as <= does"
    ),
    **{
        f"shared.money.payees.x_payee_columns__mutmut_{n}": (
            "judge_payee reads payee_open for truth only: NULL and 0 refuse alike, 2 and 1 pass"
        )
        for n in (11, 13, 14)
    },
    "shared.money.payees.x_resolve_payee__mutmut_15": (
        "with no user found, judge_payee refuses PAYEE_NOT_FOUND before it reads payee_open"
    ),
    "shared.money.idempotency.x_run_keyed__mutmut_7": (
        "the loop breaks at attempt MAX_ATTEMPTS, so a bound one past it is never reached"
    ),
    "shared.money.idempotency.x_run_keyed__mutmut_56": (
        "every money answer's body holds its transaction's fresh Id, so an answer run again never"
        " has the body of the one whose commit was lost unless it is that one replayed"
    ),
    "shared.money.idempotency.x_stored_answer__mutmut_7": (
        "a Completed record's status and body are written together in one UPDATE (store_success,"
        " the transfer's batch): neither is NULL without the other"
    ),
    "shared.notices.delivery.xǁ_Attemptǁoutcome__mutmut_4": _RECEIPT_UNREAD,
    **{
        f"shared.notices.claim_sql.x_claim_statement__mutmut_{n}": _CLAIM_BINDS
        for n in (13, 16, 56, 59)
    },
    "shared.notices.claim_sql.x_claim_statement__mutmut_44": (
        "the subquery picks only free rows under a lock held to the UPDATE (PostgreSQL's FOR"
        " UPDATE SKIP LOCKED re-checks a row changed meanwhile, SQL Server's UPDLOCK holds it,"
        " SQLite has one writer): the outer re-check matches every row it returns"
    ),
    "shared.notices.delivery.xǁNoticeDeliveryRunǁdeliver__mutmut_38": (
        "logging formats a message only when it has arguments: alone, a '%' in it prints as is"
    ),
    "shared.notices.delivery.xǁNoticeDeliveryRunǁdeliver__mutmut_63": (
        "a missing address is refused above (address_problem), so the address is never None here"
    ),
    "shared.notices.transports.xǁPickupDirectoryTransportǁdeliver__mutmut_25": (
        "NoticeRefused's id is never read: the delivery that catches it names the notice it holds"
    ),
    "shared.notices.transports.xǁPickupDirectoryTransportǁdeliver__mutmut_33": (
        "only its writer removes a live temporary (a leftover sweep takes only those older than"
        " any lease), so the writer's own removal never meets FileNotFoundError"
    ),
    "shared.notices.delivery.xǁNoticeDeliveryRunǁ_mark__mutmut_8": (
        "_may_retry gives up at try MARK_ATTEMPTS, so the loop never reaches one try more"
    ),
    "shared.notices.delivery.xǁNoticeDeliveryRunǁ_mark__mutmut_16": (
        "on a first try no earlier try of ours can have marked the row, so asking whether it"
        " carries our receipt answers no, as not asking does"
    ),
    **{
        f"shared.notices.delivery.xǁNoticeDeliveryRunǁ_mark__mutmut_{n}": _RECEIPT_UNREAD
        for n in (74, 76, 89, 91)
    },
    "shared.notices.transports.xǁPickupDirectoryTransportǁremove_leftovers__mutmut_12": (
        "os.DirEntry.stat reads follow_symlinks for truth: None follows no link, as False"
    ),
    "shared.notices.claim.xǁNoticeClaimǁclaim__mutmut_2": _CLAIM_CACHE,
    "shared.notices.claim.xǁNoticeClaimǁclaim__mutmut_3": _CLAIM_CACHE,
    "shared.notices.claim.xǁNoticeClaimǁclaim__mutmut_16": _CLAIM_CACHE,
    "shared.notices.claim.xǁNoticeClaimǁclaim__mutmut_8": _CLAIM_BINDS,
    "shared.notices.claim.xǁNoticeClaimǁmarked_with__mutmut_6": (
        "a receipt is written only with its DeliveredAt: the mark and the runbook set both"
    ),
    "shared.notices.claim.xǁNoticeClaimǁclaim__mutmut_9": _CLAIM_BINDS,
    "shared.notices.notify.x__release_at_exit__mutmut_8": _RELEASED,
    "shared.notices.notify.x__release_at_exit__mutmut_12": _RELEASED,
    "shared.notices.render.x__email_package_message__mutmut_5": _OWN_NAME,
    "shared.notices.render.x__email_package_message__mutmut_6": _OWN_NAME,
    "shared.notices.render.x__email_package_message__mutmut_13": _OWN_NAME,
    "shared.notices.render.x__email_package_message__mutmut_14": _OWN_NAME,
    "shared.notices.render.x__email_package_message__mutmut_26": _OWN_NAME,
    "shared.notices.render.x__email_package_message__mutmut_27": _OWN_NAME,
    "shared.notices.render.x__parsed__mutmut_1": _IMPORT_TIME,
    "shared.notices.render.x__parsed__mutmut_2": _IMPORT_TIME,
    "shared.notices.render.x__parsed__mutmut_3": _IMPORT_TIME,
    "shared.notices.render.x__parsed__mutmut_4": _IMPORT_TIME,
    "shared.notices.render.x__parsed__mutmut_5": _IMPORT_TIME,
    "shared.notices.status.x_read_owed_status__mutmut_10": _FREE_SUM,
    "shared.notices.status.x_read_owed_status__mutmut_12": _FREE_SUM,
    "shared.notices.status.x_read_owed_status__mutmut_21": _ONE_ROW,
    "shared.notices.status.x_read_owed_status__mutmut_31": _ONE_ROW,
    "shared.notices.status.x_read_owed_status__mutmut_49": (
        "with live_only=False the holders' query has no `now` to bind"
    ),
    "shared.notices.status.x_read_owed_status__mutmut_50": "live_only=None builds the False query",
    "shared.notices.transports.xǁBlobContainerTransportǁdeliver__mutmut_5": _OVERWRITE,
    "shared.notices.transports.xǁBlobContainerTransportǁdeliver__mutmut_9": _OVERWRITE,
    "shared.notices.transports.xǁBlobContainerTransportǁdeliver__mutmut_19": (
        "every ResourceExistsError the storage client raises carries error_code"
    ),
    "shared.notices.transports.xǁBlobContainerTransportǁprobe__mutmut_2": _BY_TYPE,
    "shared.notices.transports.xǁBlobContainerTransportǁprobe__mutmut_3": _BY_TYPE,
    "shared.notices.transports.xǁBlobContainerTransportǁprobe__mutmut_4": _BY_TYPE,
    "shared.notices.transports.xǁPickupDirectoryTransportǁprobe__mutmut_2": _PROBE_NAME,
    "shared.notices.transports.xǁPickupDirectoryTransportǁprobe__mutmut_4": _PROBE_NAME,
    "shared.notices.transports.xǁPickupDirectoryTransportǁprobe__mutmut_6": _PROBE_NAME,
    "shared.notices.transports.xǁPickupDirectoryTransportǁprobe__mutmut_7": _PROBE_NAME,
    **{
        f"shared.notices.transports.x__inside_git_tree__mutmut_{n}": (
            "check=True only raises CalledProcessError for a non-zero exit, a SubprocessError the"
            " guard reads as it reads the exit: outside any tree either way"
        )
        for n in (11, 15, 26)
    },
    **{
        f"shared.notices.claim.{name}__mutmut_{n}": (
            "an alias's name only labels the table in the SQL: any name selects the same rows"
        )
        for name, numbers in (
            ("x_evidence_stands", (2, 3, 4, 5, 6, 7)),
            ("xǁNoticeClaimǁ_held_query", (2, 3, 4)),
        )
        for n in numbers
    },
    **{
        f"shared.notices.claim.x_evidence_stands__mutmut_{n}": (
            "HeldNotice reads the column for truth only: NULL reads as 0 does, 2 as 1"
        )
        for n in (23, 25, 26, 29, 31, 32)
    },
    **{
        f"shared.notices.hosted.x_runner_kind__mutmut_{n}": (
            "the first field of a split is the same however many splits follow it"
        )
        for n in (4, 7)
    },
    "shared.notices.render.x__plain_message__mutmut_20": "'ASCII' and 'ascii' name one codec",
    "shared.notices.render.x_address_problem__mutmut_12": (
        "the header parser flags a defect on, or refuses, every address holding a DEL, and a"
        " defect is refused below"
    ),
    "shared.notices.render.x_address_problem__mutmut_16": (
        "partition and rpartition differ only for a text starting or ending in '@' that holds"
        " another '@', which the header parser never reads back as itself"
    ),
    **{
        f"shared.notices.render.x_address_problem__mutmut_{n}": (
            "the header registry looks a name up whatever its case"
        )
        for n in (24, 25)
    },
    **{
        f"shared.notices.render.x_address_problem__mutmut_{n}": (
            "a To header always has its addresses attribute, so the default is never taken"
        )
        for n in (30, 33)
    },
    "shared.notices.render.x_render_notice__mutmut_3": (
        "_EVENTS and _SUBJECTS hold the same kinds, so either lookup failing is both failing"
    ),
    "shared.notices.render.x_render_notice__mutmut_6": (
        "UnrenderableKind's argument is never read: the delivery names the kind it holds"
    ),
    "shared.notices.render.xǁ_HeaderClassCacheǁ__getitem____mutmut_4": (
        "setdefault returns the class stored first, so every lookup still answers that one class"
        " (the mutant only builds a throwaway class per lookup)"
    ),
    **{
        f"shared.notices.claim.xǁNoticeClaimǁ_held_query__mutmut_{n}": (
            "without an ON clause SQLAlchemy joins on the one foreign key between the tables,"
            " SubscriberNotices.UserId to AspNetUsers.Id: the same join"
        )
        for n in (12, 15)
    },
    "shared.notices.sweep.xǁNoticeSweepǁ_run__mutmut_82": (
        "logging formats a message only when it has arguments: alone, the line prints as is"
    ),
    "shared.notices.claim.xǁNoticeClaimǁtake__mutmut_1": (
        "the sweep, take's one caller in the product, always passes holds_none"
    ),
    "shared.notices.sweep.xǁNoticeSweepǁ_run__mutmut_77": (
        "delivered never exceeds held, so delivered - taken == held only where taken is 0 (as +):"
        " elsewhere the mutant only renews a runner that holds none, and the renew matches no row"
    ),
}
# Mutants of code that runs only on SQL Server: killed by the opt-in SQL Server ring
# (AZUREBANK_TEST_SQLSERVER), which this machine cannot run; counted as not killed here.
# (The tail lock's SQL Server arm is a lambda in a module-level table, which mutmut leaves alone.)
SQL_SERVER_ONLY: set[str] = set()
# The money's: the application lock's batch and its call, run only on SQL Server (a variable's
# name is case-insensitive only under a case-insensitive catalog collation, so it is here too).
SQL_SERVER_ONLY |= {
    *(f"shared.money.applock_sql.x__take_mssql__mutmut_{n}" for n in range(1, 12)),
    *(f"shared.money.applock_sql.x_mssql_applock_batch__mutmut_{n}" for n in (2, 4, 6, 7)),
    *(f"shared.money.applock_sql.x_mssql_applock_batch__mutmut_{n}" for n in (10, 18, 20, 21)),
    # The tag's bind type decides NVARCHAR over VARCHAR for SQL Server's driver; PostgreSQL and
    # SQLite bind a str alike whatever its declared type.
    *(f"shared.money.payees.x_payee_match__mutmut_{n}" for n in (5, 7)),
}

# The mutmut settings every package shares (the package's own are added per package).
# - also_copy: mutmut copies source_paths and tests/ into mutants/; the tests also import the
#   other packages and read the docs.
# - forkserver: each mutant's worker forks from a process that has imported the tests but run
#   none, so no cache filled by an earlier run hides a mutant.
# - tests.support.mutation_plugin empties the packages' statement caches before each test, so
#   every test that uses a cached statement runs the code that builds it.
# - pytest's own timeout bounds a mutant that makes a test wait on a lock for ever (it spends no
#   CPU, so mutmut's CPU-time limit would never fire); the slowest covering test takes seconds.
COMMON = """
[tool.mutmut]
source_paths = ["shared"]
also_copy = [
  "api_funcs", "relay_func", "azurebank_cli", "function_app.py", "host.json", "bench",
  "docs", "README.md", "compose.yaml", "requirements.txt", "requirements-dev.txt",
]
pytest_add_cli_args = [
  "-p", "no:cacheprovider", "-p", "tests.support.mutation_plugin", "-o", "timeout=120",
]
process_isolation = "forkserver"
use_git_change_detection = false
"""


KILLED = ("killed", "timeout")  # a timeout is a hang the suite noticed: a kill


@dataclass
class Score:
    package: str
    by_status: dict[str, list[str]] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return len(self.by_status.get(status, []))

    @property
    def total(self) -> int:
        return sum(len(names) for names in self.by_status.values())

    @property
    def equivalent(self) -> list[str]:
        return [n for n in self.by_status.get("survived", []) if n in EQUIVALENT]

    @property
    def survivors(self) -> list[str]:
        """Every mutant not killed and not known to be equivalent: survived, covered by no
        test, or not yet checked."""
        return [
            name
            for status, names in sorted(self.by_status.items())
            if status not in KILLED
            for name in names
            if name not in EQUIVALENT
        ]

    @property
    def to_retry(self) -> list[str]:
        """The survivors, and every mutant not judged yet, equivalent or not."""
        return sorted(set(self.survivors) | set(self.by_status.get("not checked", [])))

    @property
    def killed(self) -> int:
        return self.count("killed") + self.count("timeout")

    @property
    def score(self) -> float:
        judged = self.total - len(self.equivalent)
        return self.killed / judged if judged else 0.0

    def line(self) -> str:
        others = ", ".join(
            f"{len(names)} {status}"
            for status, names in sorted(self.by_status.items())
            if status not in (*KILLED, "survived")
        )
        sql_server = len([n for n in self.survivors if n in SQL_SERVER_ONLY])
        return (
            f"{self.package}: {self.total} mutants, {self.killed} killed"
            f" ({self.count('timeout')} of them by timeout), {self.count('survived')} survived"
            f" ({len(self.equivalent)} of them equivalent, {sql_server} in SQL Server code)"
            f"{', ' + others if others else ''};"
            f" score {self.killed}/{self.total - len(self.equivalent)} = {self.score:.1%}"
        )


def _checkout_files() -> list[str]:
    """The checkout's files as git sees them: tracked and new, not the ignored ones."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    return sorted(name for name in out.decode().split("\0") if name and (ROOT / name).is_file())


def _save_record(package: str) -> None:
    """The copy's verdicts and function hashes (mutmut's `.meta` files, less the timings), by
    source file, into the package's record."""
    mutants = SCRATCH / package / "mutants"
    files = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        if data.get("exit_code_by_key"):
            keep = ("exit_code_by_key", "hash_by_function_name")
            files[meta.relative_to(mutants).as_posix()] = {k: data.get(k, {}) for k in keep}
    if files:
        RECORD.mkdir(exist_ok=True)
        text = json.dumps(files, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        (RECORD / f"{package}.json").write_text(text, encoding="utf-8")


def _seed_from_record(package: str, work: Path) -> None:
    """Write the record's `.meta` files into a fresh copy, for mutmut to keep what holds."""
    record = RECORD / f"{package}.json"
    if not record.exists():
        return
    for name, data in json.loads(record.read_text(encoding="utf-8")).items():
        meta = work / "mutants" / name
        meta.parent.mkdir(parents=True, exist_ok=True)
        # mutmut's loader requires the timing tables too; empty ones it fills as it runs.
        timings: dict[str, dict[str, float]] = {
            "durations_by_key": {},
            "estimated_durations_by_key": {},
        }
        meta.write_text(json.dumps({**timings, **data}, indent=4), encoding="utf-8")


def _prepare(package: str, *, fresh: bool, seed: bool, tests: list[str] | None = None) -> Path:
    """The package's copy of the checkout with its mutmut section. A fresh copy (seeded with
    the package's record when `seed`), or the last one brought up to date (changed files
    copied, removed ones removed, mutmut's own copy of the tests dropped so it copies them
    again), keeping mutmut's results."""
    work = SCRATCH / package
    if fresh:
        shutil.rmtree(work, ignore_errors=True)
    # A checkout holds no copy until a run makes one: --resume and --retry then start from the
    # record too, or mutmut would count every mutant unchecked and the record would lose them.
    if seed and not (work / "mutants").is_dir():
        _seed_from_record(package, work)
    files = _checkout_files()
    for name in files:
        source, target = ROOT / name, work / name
        if target.exists() and target.read_bytes() == source.read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    keep = set(files) | {"mutmut.log"}
    for stale in sorted(work.rglob("*")):
        relative = stale.relative_to(work).as_posix()
        if stale.is_file() and not relative.startswith("mutants/") and relative not in keep:
            stale.unlink()
    shutil.rmtree(work / "mutants" / "tests", ignore_errors=True)
    section = COMMON + (
        f"only_mutate = [{json.dumps(f'shared/{package}/*')}]\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests or TESTS[package])}\n"
    )
    (work / "pyproject.toml").write_text(
        (ROOT / "pyproject.toml").read_text(encoding="utf-8") + section, encoding="utf-8"
    )
    return work


def _run(package: str, work: Path, workers: int, names: list[str]) -> int:
    log = work / "mutmut.log"
    print(f"mutation: mutmut runs in {work.relative_to(ROOT)}/ (its output: mutmut.log)")
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = ["nice", "-n", "19", str(VENV_BIN / "mutmut"), "run", "--max-children"]
    with log.open("a", encoding="utf-8") as out:
        running = subprocess.Popen(
            [*command, str(workers), *names], cwd=work, env=env, stdout=out, stderr=out
        )
        while True:
            try:
                code = running.wait(timeout=60)
                break
            except subprocess.TimeoutExpired:
                _save_record(package)
    _save_record(package)
    return code


def _verdicts(work: Path) -> dict[Path, dict[str, int | None]]:
    return {
        meta: json.loads(meta.read_text(encoding="utf-8")).get("exit_code_by_key", {})
        for meta in sorted((work / "mutants").rglob("*.py.meta"))
    }


def _keep_unkilled_verdicts(
    package: str, work: Path, before: dict[Path, dict[str, int | None]]
) -> None:
    """After a run against some tests only: a mutant those tests did not kill keeps the verdict
    the whole selection gave it (they cannot show it survives, nor that no test covers it)."""
    for meta, codes in before.items():
        if not meta.exists():
            continue
        data = json.loads(meta.read_text(encoding="utf-8"))
        now = data.get("exit_code_by_key", {})
        for name, code in codes.items():
            if name in now and _status(now[name]) not in KILLED:
                now[name] = code
        meta.write_text(json.dumps(data, indent=4), encoding="utf-8")
    # mutmut's map of which test runs which function now knows these tests only: drop it, so the
    # next run of the whole selection maps every test again.
    (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    _save_record(package)


def _status(code: int | None) -> str:
    """What mutmut's recorded exit code means. Not mutmut's own table: it calls 255 a timeout,
    but 255 is its worker failing to run the tests at all (pytest's usage error, exit 4)."""
    if code in (1, 3):
        return "killed"  # a test failed (3: pytest's internal error)
    if code in (24, -24, 152, 36):
        return "timeout"  # over the CPU-time limit or the wall clock: a hang, noticed
    return {0: "survived", 5: "no tests", 33: "no tests", None: "not checked"}.get(
        code, f"not run (exit {code})"
    )


def _score(package: str) -> Score:
    """The statuses mutmut recorded (mutants/**/*.py.meta), by mutant name; the package's
    record where this checkout holds no copy."""
    score = Score(package)
    mutants = SCRATCH / package / "mutants"
    record = RECORD / f"{package}.json"
    if mutants.is_dir():
        metas = [json.loads(m.read_text(encoding="utf-8")) for m in sorted(mutants.rglob("*.meta"))]
    elif record.exists():
        metas = list(json.loads(record.read_text(encoding="utf-8")).values())
    else:
        metas = []
    for data in metas:
        for name, code in sorted(data.get("exit_code_by_key", {}).items()):
            score.by_status.setdefault(_status(code), []).append(name)
    return score


def _show(package: str, names: list[str]) -> None:
    """Each mutant's diff, as `mutmut show` prints it."""
    for name in names:
        shown = subprocess.run(
            [str(VENV_BIN / "mutmut"), "show", name],
            cwd=SCRATCH / package,
            capture_output=True,
            text=True,
            check=False,
        )
        print(shown.stdout.rstrip() or f"# {name}: {shown.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", metavar="package", help=", ".join(TESTS))
    parser.add_argument("--workers", type=int, default=2)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="go on in the last copy")
    mode.add_argument("--retry", action="store_true", help="run the last survivors again")
    mode.add_argument("--report", action="store_true", help="score the last runs only")
    mode.add_argument("--fresh", action="store_true", help="a fresh copy, ignoring the record")
    parser.add_argument("--diffs", action="store_true", help="print each survivor's diff")
    parser.add_argument(
        "--tests",
        nargs="+",
        metavar="test",
        help="with --retry: run the survivors against these tests only (new ones, say); a"
        " mutant they do not kill keeps its verdict",
    )
    args = parser.parse_args(argv)
    if args.tests and not args.retry:
        parser.error("--tests goes with --retry only")
    unknown = sorted(set(args.packages) - set(TESTS))
    if unknown:
        parser.error(f"no such package: {', '.join(unknown)} (the packages: {', '.join(TESTS)})")
    scores = []
    for package in args.packages or list(TESTS):
        if not args.report:
            names = _score(package).to_retry if args.retry else []
            work = _prepare(
                package,
                fresh=not (args.resume or args.retry),
                seed=not args.fresh,
                tests=args.tests,
            )
            before = _verdicts(work) if args.tests else {}
            code = _run(package, work, args.workers, names)
            if args.tests:
                _keep_unkilled_verdicts(package, work, before)
            if code != 0:
                print(f"mutation: mutmut exited {code} on {package}; see its mutmut.log")
                return 2
        score = _score(package)
        scores.append(score)
        print(score.line(), flush=True)
        for name in score.survivors:
            print(f"  not killed: {name}")
        if args.diffs:
            _show(package, score.survivors)
    return 0 if all(s.score >= GOAL for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
