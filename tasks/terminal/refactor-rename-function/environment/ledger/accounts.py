from ledger.money import fmt_amt


class Account:
    def __init__(self, name: str, currency: str = "EUR"):
        self.name, self.currency, self.entries = name, currency, []

    def post(self, cents: int, memo: str = "") -> None:
        self.entries.append((cents, memo))

    def balance(self) -> int:
        return sum(c for c, _ in self.entries)

    def describe(self) -> str:
        return f"{self.name}: {fmt_amt(self.balance(), self.currency)}"
