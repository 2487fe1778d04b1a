"""Hidden checks: the contact list, against the list derived here from the verifier's copy."""

from pathlib import Path

WANT = [  # from From/To/Cc of the four shipped messages, less the unsubscribed ones
    "andre@example.fr",
    "bob@stone.example",
    "jane.doe@example.com",
    "ops@example.com",
    "team@example.com",
    "wei.li@example.net",
]


def test_inbox_unchanged():
    for p in Path("/tests/inbox").iterdir():
        assert (Path("/app/inbox") / p.name).read_bytes() == p.read_bytes(), p.name
    assert Path("/app/unsubscribed.txt").read_bytes() == Path("/tests/unsubscribed.txt").read_bytes()


def test_contacts():
    assert Path("/app/out/contacts.txt").read_text().splitlines() == WANT
