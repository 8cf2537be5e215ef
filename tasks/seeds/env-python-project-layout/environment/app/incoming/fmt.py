def format_temp(value, unit, precision):
    return f"{value:.{precision}f} {unit}"
