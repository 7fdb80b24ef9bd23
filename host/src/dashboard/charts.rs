//! The console's charts: a task's jobs done and failed per minute with the oldest due
//! job's wait, a topic's messages delivered and dead per minute, over the last hour or day.
//! Read from the per-minute counters (`almanac.task_minutes`, `almanac.topic_minutes`, V30),
//! never from the history, and drawn as SVG here in the host: no chart library to vendor
//! and keep patched, nothing for the page's Content-Security-Policy to allow (an image,
//! not a script), and a chart is a URL any tool can fetch.
use std::fmt::Write;

use chrono::{DateTime, Duration, DurationRound, Utc};
use tokio_postgres::Client;

use crate::db::Sql;
use crate::text::html_escape;

const TASK: &str = include_str!("chart_task.sql");
const TOPIC: &str = include_str!("chart_topic.sql");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    Hour,
    Day,
}

impl Span {
    pub fn parse(text: Option<&str>) -> Option<Span> {
        match text.unwrap_or("hour") {
            "hour" => Some(Span::Hour),
            "day" => Some(Span::Day),
            _ => None,
        }
    }

    /// One bar's width, and how many bars.
    fn bars(self) -> (Duration, usize) {
        match self {
            Span::Hour => (Duration::minutes(1), 60),
            Span::Day => (Duration::minutes(15), 96),
        }
    }

    /// When the span's first bar starts, the last being the one `now` is in.
    fn first(self, now: DateTime<Utc>) -> DateTime<Utc> {
        let (width, count) = self.bars();
        now.duration_trunc(width).unwrap_or(now) - width * (count as i32 - 1)
    }

    fn name(self) -> &'static str {
        match self {
            Span::Hour => "last hour",
            Span::Day => "last day",
        }
    }
}

/// One bar: what went well (done, delivered), what did not (failed, dead), and for a task
/// the longest the oldest due job had waited (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bar {
    pub at: DateTime<Utc>,
    pub good: i64,
    pub bad: i64,
    pub waited: f64,
}

#[derive(Debug)]
pub struct Chart {
    pub subject: String,
    pub span: Span,
    /// "done" and "failed", or "delivered" and "dead".
    pub labels: (&'static str, &'static str),
    /// Whether the chart has a wait (tasks do, topics do not).
    pub waits: bool,
    /// Every bar of the span, oldest first, a quiet one at zero.
    pub bars: Vec<Bar>,
}

/// The span's bars from `rows` of (start, good, bad, waited), ending with the one now is in.
fn bars(span: Span, now: DateTime<Utc>, rows: impl IntoIterator<Item = Bar>) -> Vec<Bar> {
    let (width, count) = span.bars();
    let first = span.first(now);
    let mut out: Vec<Bar> = (0..count).map(|i| Bar { at: first + width * i as i32, ..Bar::default() }).collect();
    for r in rows {
        let i = (r.at - first).num_seconds().div_euclid(width.num_seconds());
        if let Some(bar) = usize::try_from(i).ok().and_then(|i| out.get_mut(i)) {
            // `done` is net (a claim's mark taken back by a failure) and never below zero
            // over a minute; a bar is clamped all the same.
            bar.good += r.good.max(0);
            bar.bad += r.bad.max(0);
            bar.waited = bar.waited.max(r.waited);
        }
    }
    out
}

async fn read(client: &Client, sql: &str, subject: &str, span: Span) -> Result<Vec<Bar>, tokio_postgres::Error> {
    let now = Utc::now();
    let from = span.first(now);
    let seconds = span.bars().0.num_seconds() as f64;
    let rows = client.rows(sql, &[&subject, &from, &seconds]).await?;
    Ok(bars(span, now, rows.iter().map(|r| Bar { at: r.get(0), good: r.get(1), bad: r.get(2), waited: r.get(3) })))
}

pub async fn task(client: &Client, task: &str, span: Span) -> Result<Chart, tokio_postgres::Error> {
    let bars = read(client, TASK, task, span).await?;
    Ok(Chart { subject: task.to_owned(), span, labels: ("done", "failed"), waits: true, bars })
}

pub async fn topic(client: &Client, topic: &str, span: Span) -> Result<Chart, tokio_postgres::Error> {
    let bars = read(client, TOPIC, topic, span).await?;
    Ok(Chart { subject: topic.to_owned(), span, labels: ("delivered", "dead"), waits: false, bars })
}

const WIDTH: f64 = 600.0;
const BARS_TOP: f64 = 22.0;
const BARS_HEIGHT: f64 = 100.0;
const WAIT_HEIGHT: f64 = 36.0;

fn seconds(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// The chart as an SVG document. Every text in it is escaped: a subject is a task or
/// topic name, which the operator chose but the page must not trust.
pub fn svg(chart: &Chart) -> String {
    let (good, bad) = chart.labels;
    let total = |f: fn(&Bar) -> i64| chart.bars.iter().map(f).sum::<i64>();
    let (goods, bads) = (total(|b| b.good), total(|b| b.bad));
    let top = chart.bars.iter().map(|b| b.good + b.bad).max().unwrap_or(0).max(1);
    let most_wait = chart.bars.iter().map(|b| b.waited).fold(0.0, f64::max);
    let height = BARS_TOP + BARS_HEIGHT + 18.0 + if chart.waits { WAIT_HEIGHT + 14.0 } else { 0.0 };
    let summary = html_escape(&format!("{}, {}: {goods} {good}, {bads} {bad}", crate::text::printable(&chart.subject), chart.span.name()));
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{summary}" font-family="sans-serif" font-size="11"><title>{summary}</title>"#
    );
    let _ = write!(
        s,
        r##"<text x="0" y="12">{summary}{}</text><text x="{WIDTH}" y="12" text-anchor="end" fill="#555">max {top} per bar</text>"##,
        if bads > 0 { " ⚠" } else { "" }
    );
    let step = WIDTH / chart.bars.len().max(1) as f64;
    let scale = BARS_HEIGHT / top as f64;
    let base = BARS_TOP + BARS_HEIGHT;
    let (width, _) = chart.span.bars();
    for (i, b) in chart.bars.iter().enumerate() {
        let x = step * i as f64;
        let (hg, hb) = (b.good as f64 * scale, b.bad as f64 * scale);
        let label = html_escape(&format!("{}–{} UTC: {} {good}, {} {bad}", b.at.format("%H:%M"), (b.at + width).format("%H:%M"), b.good, b.bad));
        let _ = write!(s, r#"<g><title>{label}</title>"#);
        let _ = write!(s, r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{hg:.1}" fill="#2e7d32"/>"##, base - hg, (step - 1.0).max(1.0));
        if b.bad > 0 {
            let _ = write!(
                s,
                r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#c62828"/>"##,
                base - hg - hb.max(2.0),
                (step - 1.0).max(1.0),
                hb.max(2.0)
            );
        }
        let _ = write!(s, "</g>");
    }
    let _ = write!(s, r##"<line x1="0" y1="{base}" x2="{WIDTH}" y2="{base}" stroke="#999"/>"##);
    let (first, last) = (chart.bars.first().map(|b| b.at), chart.bars.last().map(|b| b.at + width));
    if let (Some(first), Some(last)) = (first, last) {
        let _ = write!(
            s,
            r##"<text x="0" y="{:.0}" fill="#555">{} UTC</text><text x="{WIDTH}" y="{:.0}" text-anchor="end" fill="#555">{} UTC</text>"##,
            base + 13.0,
            first.format("%H:%M"),
            base + 13.0,
            last.format("%H:%M")
        );
    }
    if chart.waits {
        let wait_base = base + 18.0 + WAIT_HEIGHT;
        let wait_scale = if most_wait > 0.0 { WAIT_HEIGHT / most_wait } else { 0.0 };
        let points: Vec<String> =
            chart.bars.iter().enumerate().map(|(i, b)| format!("{:.1},{:.1}", step * i as f64 + step / 2.0, wait_base - b.waited * wait_scale)).collect();
        let _ = write!(s, r##"<polyline points="{}" fill="none" stroke="#b26a00" stroke-width="1.5"/>"##, points.join(" "));
        let _ = write!(
            s,
            r##"<text x="0" y="{:.0}" fill="#b26a00">oldest due job waited up to {}</text>"##,
            wait_base + 13.0,
            if most_wait > 0.0 { seconds(most_wait) } else { "0 s (none waited)".to_owned() }
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn bars_cover_the_span_and_fold_minutes_into_their_bar() {
        let now = Utc.with_ymd_and_hms(2026, 12, 7, 12, 7, 30).unwrap();
        let at = |h, m| Utc.with_ymd_and_hms(2026, 12, 7, h, m, 0).unwrap();
        let day = bars(
            Span::Day,
            now,
            [
                Bar { at: at(12, 1), good: 5, bad: 1, waited: 3.0 },
                Bar { at: at(12, 6), good: 2, bad: 0, waited: 9.0 },
                Bar { at: at(11, 59), good: 7, bad: 0, waited: 0.0 },
                Bar { at: Utc.with_ymd_and_hms(2026, 12, 6, 12, 0, 0).unwrap(), good: 99, bad: 0, waited: 0.0 },
            ],
        );
        assert_eq!((day.len(), day[0].at), (96, Utc.with_ymd_and_hms(2026, 12, 6, 12, 15, 0).unwrap()));
        assert_eq!(day.last().unwrap(), &Bar { at: at(12, 0), good: 7, bad: 1, waited: 9.0 });
        assert_eq!(day[94], Bar { at: at(11, 45), good: 7, bad: 0, waited: 0.0 });
        assert_eq!(day.iter().map(|b| b.good).sum::<i64>(), 14, "a minute before the span is not drawn");
        let hour = bars(Span::Hour, now, [Bar { at: at(12, 7), good: -3, bad: 2, waited: 0.0 }]);
        assert_eq!((hour.len(), hour[59].at, hour[59].good, hour[59].bad), (60, at(12, 7), 0, 2));
    }

    #[test]
    fn the_svg_says_its_totals_and_escapes_its_subject() {
        let now = Utc.with_ymd_and_hms(2026, 12, 7, 12, 7, 30).unwrap();
        let chart = Chart {
            subject: "<script>alert(1)</script>".into(),
            span: Span::Hour,
            labels: ("done", "failed"),
            waits: true,
            bars: bars(Span::Hour, now, [Bar { at: now.duration_trunc(Duration::minutes(1)).unwrap(), good: 40, bad: 2, waited: 75.0 }]),
        };
        let svg = svg(&chart);
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("<script"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;, last hour: 40 done, 2 failed"), "{svg}");
        assert!(svg.contains("12:07–12:08 UTC: 40 done, 2 failed"));
        assert!(svg.contains("oldest due job waited up to 75 s"));
        assert_eq!(svg.matches("<rect").count(), 60 + 1, "a bar per minute and the failures on one");
        assert_eq!(Span::parse(Some("week")), None);
    }
}
