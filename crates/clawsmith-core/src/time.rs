//! Timestamps people and peers read: UTC, ISO 8601.

/// `ms` milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC, ISO 8601), or
/// `YYYY-MM-DDTHH:MM:SS.mmmZ` with `millis`.
pub fn utc_time(ms: i64, millis: bool) -> String {
    let seconds = ms.div_euclid(1000);
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let fraction = if millis {
        format!(".{:03}", ms.rem_euclid(1000))
    } else {
        String::new()
    };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{fraction}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::utc_time;

    #[test]
    fn times_are_iso_8601_in_utc() {
        for (ms, millis, expected) in [
            (0, false, "1970-01-01T00:00:00Z"),
            (951_782_400_005, true, "2000-02-29T00:00:00.005Z"),
            (1_796_527_274_123, true, "2026-12-06T03:21:14.123Z"),
            (4_107_542_399_999, false, "2100-02-28T23:59:59Z"),
            (-1, true, "1969-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(utc_time(ms, millis), expected, "{ms}");
        }
    }
}
