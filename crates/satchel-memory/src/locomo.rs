//! The LoCoMo conversation format and its evidence-recall metric, for the
//! memory benchmark (`satchel bench memory`).
//!
//! A file is a list of samples; each has `conversation` (`speaker_a`,
//! `speaker_b`, `session_N` lists of turns `{speaker, dia_id, text,
//! blip_caption?}`, `session_N_date_time` like "1:56 pm on 8 May, 2023")
//! and `qa` (`{question, evidence: ["D3:5"...], category}`). Recall@k of a
//! question is the share of its evidence turns among the first k
//! retrieved, averaged over the questions that have evidence, as the
//! LoCoMo repository computes it.

use std::collections::BTreeMap;

use satchel_store::Timestamp;
use serde::Deserialize;
use serde_json::Value;

/// One dialogue turn, dated by its session.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Its id, `D<session>:<turn>`.
    pub dia_id: String,
    /// Who said it.
    pub speaker: String,
    /// What was said.
    pub text: String,
    /// The caption of a shared image, if any.
    pub caption: Option<String>,
    /// When its session took place.
    pub date: Timestamp,
}

impl Turn {
    /// The turn as a memory, worded as the LoCoMo repository words a turn
    /// for its retrievers (`task_eval/dpr_qa.py`, less the session date,
    /// which is the memory's own date): `Speaker said, "text" [shares
    /// caption]`.
    pub fn memory_text(&self) -> String {
        match &self.caption {
            Some(caption) => format!(
                "{} said, \"{}\" [shares {caption}]",
                self.speaker, self.text
            ),
            None => format!("{} said, \"{}\"", self.speaker, self.text),
        }
    }
}

/// One question with its evidence, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The question.
    pub text: String,
    /// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub category: u8,
    /// Evidence turn ids, well-formed and distinct.
    pub evidence: Vec<String>,
}

/// One conversation and its questions.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `sample_id`.
    pub id: String,
    /// Every turn, in order.
    pub turns: Vec<Turn>,
    /// Every question (some without evidence).
    pub questions: Vec<Question>,
    /// Evidence ids that could not be read and were skipped.
    pub skipped_evidence: usize,
}

/// The name of a LoCoMo question category.
pub fn category_name(category: u8) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

#[derive(Deserialize)]
struct RawSample {
    sample_id: Value,
    conversation: serde_json::Map<String, Value>,
    #[serde(default)]
    qa: Vec<RawQuestion>,
}

#[derive(Deserialize)]
struct RawQuestion {
    question: String,
    #[serde(default)]
    evidence: Vec<Value>,
    #[serde(default)]
    category: Value,
}

#[derive(Deserialize)]
struct RawTurn {
    speaker: String,
    dia_id: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

/// Parses "1:56 pm on 8 May, 2023" (UTC).
pub fn parse_session_date(text: &str) -> Option<Timestamp> {
    let (clock, date) = text.trim().split_once(" on ")?;
    let clock = clock.trim().to_lowercase();
    let (hm, meridiem) = clock.rsplit_once(' ')?;
    let (hour, minute) = hm.split_once(':')?;
    let mut hour: i64 = hour.trim().parse().ok()?;
    let minute: i64 = minute.trim().parse().ok()?;
    match meridiem {
        "am" if hour == 12 => hour = 0,
        "am" => {}
        "pm" if hour < 12 => hour += 12,
        "pm" => {}
        _ => return None,
    }
    let date = date.replace(',', " ");
    let mut parts = date.split_whitespace();
    let day: u32 = parts.next()?.parse().ok()?;
    let month = match parts.next()?.to_lowercase().get(..3)? {
        "jan" => 1,
        "feb" => 2,
        "mar" => 3,
        "apr" => 4,
        "may" => 5,
        "jun" => 6,
        "jul" => 7,
        "aug" => 8,
        "sep" => 9,
        "oct" => 10,
        "nov" => 11,
        "dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    Timestamp::parse_rfc3339(&format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:00Z"
    ))
}

/// Well-formed evidence ids in a raw entry: `D3:5` as is, `D:11:26` read
/// as `D11:26`, `D8:6; D9:17` split; anything else is skipped.
pub fn normalise_evidence(raw: &str) -> Vec<String> {
    raw.split([';', ','])
        .filter_map(|part| {
            let digits: Vec<&str> = part
                .trim()
                .trim_start_matches('D')
                .split(':')
                .filter(|p| !p.is_empty())
                .collect();
            match digits.as_slice() {
                [session, turn]
                    if session.parse::<u32>().is_ok() && turn.parse::<u32>().is_ok() =>
                {
                    Some(format!(
                        "D{}:{}",
                        session.parse::<u32>().ok()?,
                        turn.parse::<u32>().ok()?
                    ))
                }
                _ => None,
            }
        })
        .collect()
}

/// Reads a LoCoMo-format file's text.
pub fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let raw: Vec<RawSample> =
        serde_json::from_str(text).map_err(|error| format!("not a LoCoMo file: {error}"))?;
    let mut samples = Vec::with_capacity(raw.len());
    for sample in raw {
        let id = match &sample.sample_id {
            Value::String(id) => id.clone(),
            other => other.to_string(),
        };
        let mut sessions: BTreeMap<u32, (Timestamp, Vec<RawTurn>)> = BTreeMap::new();
        for (key, value) in &sample.conversation {
            let Some(number) = key
                .strip_prefix("session_")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let date_key = format!("session_{number}_date_time");
            let date = sample
                .conversation
                .get(&date_key)
                .and_then(Value::as_str)
                .and_then(parse_session_date)
                .ok_or_else(|| format!("{id}: `{date_key}` is missing or unreadable"))?;
            let turns: Vec<RawTurn> = serde_json::from_value(value.clone())
                .map_err(|error| format!("{id}: {key}: {error}"))?;
            sessions.insert(number, (date, turns));
        }
        let turns = sessions
            .into_values()
            .flat_map(|(date, turns)| {
                turns.into_iter().map(move |turn| Turn {
                    dia_id: turn.dia_id,
                    speaker: turn.speaker,
                    text: turn.text,
                    caption: turn.blip_caption.filter(|c| !c.trim().is_empty()),
                    date,
                })
            })
            .collect();
        let mut skipped = 0;
        let questions = sample
            .qa
            .into_iter()
            .map(|q| {
                let mut evidence: Vec<String> = Vec::new();
                for raw in &q.evidence {
                    let found = raw.as_str().map(normalise_evidence).unwrap_or_default();
                    if found.is_empty() {
                        skipped += 1;
                    }
                    for id in found {
                        if !evidence.contains(&id) {
                            evidence.push(id);
                        }
                    }
                }
                Question {
                    text: q.question,
                    category: q
                        .category
                        .as_u64()
                        .and_then(|c| u8::try_from(c).ok())
                        .unwrap_or(0),
                    evidence,
                }
            })
            .collect();
        samples.push(Sample {
            id,
            turns,
            questions,
            skipped_evidence: skipped,
        });
    }
    Ok(samples)
}

/// The share of `evidence` among the first `k` of `retrieved`.
pub fn recall_at(evidence: &[String], retrieved: &[String], k: usize) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    let top = &retrieved[..k.min(retrieved.len())];
    let found = evidence.iter().filter(|id| top.contains(id)).count();
    found as f64 / evidence.len() as f64
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn session_dates_are_read() {
        assert_eq!(
            parse_session_date("1:56 pm on 8 May, 2023"),
            Timestamp::parse_rfc3339("2023-05-08T13:56:00Z")
        );
        assert_eq!(
            parse_session_date("12:09 am on 13 September, 2023"),
            Timestamp::parse_rfc3339("2023-09-13T00:09:00Z")
        );
        assert_eq!(parse_session_date("yesterday"), None);
    }

    #[test]
    fn malformed_evidence_is_normalised_or_skipped() {
        assert_eq!(normalise_evidence("D3:5"), ["D3:5"]);
        assert_eq!(normalise_evidence("D:11:26"), ["D11:26"]);
        assert_eq!(normalise_evidence("D8:6; D9:17"), ["D8:6", "D9:17"]);
        assert!(normalise_evidence("D").is_empty());
        assert!(normalise_evidence("").is_empty());
    }

    #[test]
    fn recall_is_the_share_of_evidence_found() {
        let evidence = vec!["D1:1".to_owned(), "D2:2".to_owned()];
        let retrieved: Vec<String> = ["D2:2", "D9:9", "D1:1"].map(String::from).to_vec();
        assert_eq!(recall_at(&evidence, &retrieved, 1), 0.5);
        assert_eq!(recall_at(&evidence, &retrieved, 2), 0.5);
        assert_eq!(recall_at(&evidence, &retrieved, 5), 1.0);
    }

    #[test]
    fn parses_a_small_file() {
        let text = r#"[{"sample_id": "c1", "conversation": {
            "speaker_a": "A", "speaker_b": "B",
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "later"}],
            "session_1_date_time": "1:00 pm on 1 June, 2023",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi", "blip_caption": "a dog"}]},
            "qa": [{"question": "q?", "evidence": ["D1:1", "D"], "category": 4}, {"question": "none", "category": 5}]}]"#;
        let samples = parse(text).unwrap();
        assert_eq!(samples[0].turns.len(), 2);
        assert_eq!(
            samples[0].turns[0].memory_text(),
            "A said, \"hi\" [shares a dog]"
        );
        assert_eq!(samples[0].turns[1].dia_id, "D2:1");
        assert_eq!(samples[0].questions[0].evidence, ["D1:1"]);
        assert_eq!(samples[0].skipped_evidence, 1);
        assert!(samples[0].questions[1].evidence.is_empty());
    }
}
