"""Hidden checks of the merge: its parents, the resolved code as committed, a clean tree."""

import re
import subprocess

MAIN = "dca44fcd955017378bf4e90a79ac0845d0c57709"  # "Add shout option" (setup's fixed dates)
FEATURE = "d0698ffc26fdc92d9c659452034117fec787a1d7"  # "Greet in the user's language"
ROOT = "1597a6630c603e9a23fb1a8406eb82b1fe9252cc"  # "Initial greeter"


def git(*args):
    r = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd="/app", capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_merge_commit_on_main():
    assert git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    parents = git("rev-list", "--parents", "-n", "1", "HEAD").split()[1:]
    assert parents == [MAIN, FEATURE]
    assert git("rev-list", "--max-parents=0", "HEAD").split() == [ROOT]


def test_clean_tree():
    assert git("status", "--porcelain", "--untracked-files=no") == ""
    assert not git("ls-files", "--unmerged")


def test_no_conflict_markers():
    for path in git("ls-files").split():
        text = git("show", f"HEAD:{path}")
        assert not re.search(r"^(<{7}|={7}|>{7})( |$)", text, re.M), path


def test_both_features_work():
    ns = {}
    exec(compile(git("show", "HEAD:greeter/greet.py"), "greet.py", "exec"), ns)
    greet = ns["greet"]
    assert greet("Ann") == "Hello, Ann!"
    assert greet("Ann", lang="fr") == "Bonjour, Ann!"
    assert greet("Ann", shout=True) == "HELLO, ANN!"
    assert greet("Ann", lang="es", shout=True) == "HOLA, ANN!"
    assert greet("Bo", shout=False, lang="en") == "Hello, Bo!"


def test_readme_keeps_both_paragraphs():
    readme = git("show", "HEAD:README.md")
    assert 'Pass `lang="fr"` or `lang="es"` to greet in French or Spanish.' in readme
    assert "Pass `shout=True` to get the greeting in capitals." in readme
    assert readme.startswith("# greeter\n")
