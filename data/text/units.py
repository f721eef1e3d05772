"""Units read after a number: abbreviation -> (singular, plural). Case matters ('m' metres, 'M' none)."""
from __future__ import annotations


UNITS: dict[str, tuple[str, str]] = {
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"), "lb": ("pound", "pounds"), "lbs": ("pounds", "pounds"),
    "oz": ("ounce", "ounces"), "ft": ("foot", "feet"), "mi": ("mile", "miles"), "yd": ("yard", "yards"),
    "mph": ("mile per hour", "miles per hour"), "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"), "l": ("liter", "liters"), "L": ("liter", "liters"),
    "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"), "h": ("hour", "hours"),
    "hr": ("hour", "hours"), "hrs": ("hours", "hours"), "min": ("minute", "minutes"), "s": ("second", "seconds"),
    "sec": ("second", "seconds"), "ms": ("millisecond", "milliseconds"), "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"), "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"), "kW": ("kilowatt", "kilowatts"),
    "W": ("watt", "watts"), "V": ("volt", "volts"), "dB": ("decibel", "decibels"), "mA": ("milliamp", "milliamps"),
    "°F": ("degree fahrenheit", "degrees fahrenheit"), "°C": ("degree celsius", "degrees celsius"),
    "° F": ("degree fahrenheit", "degrees fahrenheit"), "° C": ("degree celsius", "degrees celsius"),
    "°": ("degree", "degrees"), "sq ft": ("square foot", "square feet"), "ha": ("hectare", "hectares"),
    "sq m": ("square meter", "square meters"), "sq km": ("square kilometer", "square kilometers"),
    "sq mi": ("square mile", "square miles"), "m2": ("square meter", "square meters"),
    "km2": ("square kilometer", "square kilometers"), "cm2": ("square centimeter", "square centimeters"),
    "m3": ("cubic meter", "cubic meters"), "km3": ("cubic kilometer", "cubic kilometers"),
    "cm3": ("cubic centimeter", "cubic centimeters"), "cc": ("cubic centimeter", "cubic centimeters"),
    "kbps": ("kilobit per second", "kilobits per second"), "mbps": ("megabit per second", "megabits per second"),
    "Mbps": ("megabit per second", "megabits per second"), "gbps": ("gigabit per second", "gigabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"), "gal": ("gallon", "gallons"),
    "qt": ("quart", "quarts"),
}
