def add_numbers(numbers):
    total = 0
    for n in numbers:
        total += n
    return total
