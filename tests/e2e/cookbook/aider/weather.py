"""The forecasts the weather desk reports, by city."""

FORECASTS = {
    "Nairobi": "cloudy, 18 C",
    "Lima": "foggy, 16 C",
}
