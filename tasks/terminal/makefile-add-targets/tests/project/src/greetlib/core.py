def greet(name: str, occasion: str = "day") -> str:
    return f"Have a nice {occasion}, {name}!"
