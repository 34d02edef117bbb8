//! Summaries of stored executions for `satchel code stats|failures` and
//! the REPL's `/codestats` and `/codefailures`.

use satchel_store::CodeExecution;
use serde::Serialize;

use satchel_tools::format::truncate_chars;

/// Characters of code and error shown in summaries.
const EXAMPLE_CHARS: usize = 160;

/// Totals over a period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CodeStats {
    /// Executions counted.
    pub total: usize,
    /// Those that succeeded.
    pub successes: usize,
    /// Those that failed.
    pub failures: usize,
    /// Mean duration in milliseconds.
    pub average_ms: u64,
    /// 95th-percentile duration in milliseconds.
    pub p95_ms: u64,
    /// Error categories, most frequent first, each with an example.
    pub categories: Vec<CategoryCount>,
    /// Counts per language.
    pub languages: Vec<LanguageCount>,
}

/// One error category in [`CodeStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryCount {
    /// The category.
    pub category: String,
    /// How many failures had it.
    pub count: usize,
    /// The most recent failure of this kind.
    pub example: FailureSummary,
}

/// Runs and failures of one language.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LanguageCount {
    /// The language.
    pub language: String,
    /// Runs.
    pub total: usize,
    /// Failures among them.
    pub failures: usize,
}

/// A failure, shortened for reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureSummary {
    /// Execution id.
    pub id: String,
    /// When it ran (RFC 3339).
    pub at: String,
    /// Its language.
    pub language: String,
    /// Its category.
    pub category: String,
    /// The code, shortened.
    pub code: String,
    /// The error line, shortened.
    pub error: String,
}

impl FailureSummary {
    /// The summary of one stored execution.
    pub fn of(execution: &CodeExecution) -> FailureSummary {
        let code = execution.code.trim().replace('\n', "⏎ ");
        FailureSummary {
            id: execution.id.clone(),
            at: execution.created_at.to_string(),
            language: execution.language.clone(),
            category: execution
                .error_category
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            code: truncate_chars(&code, EXAMPLE_CHARS),
            error: truncate_chars(
                execution.error_message.as_deref().unwrap_or(""),
                EXAMPLE_CHARS,
            ),
        }
    }
}

impl CodeStats {
    /// The totals as the text `satchel code stats` and `/codestats` show,
    /// for a period of `days` days.
    pub fn render(&self, days: u32) -> String {
        use std::fmt::Write as _;
        let mut out = format!(
            "Code runs, last {days} days: {} ({} ok, {} failed)\n",
            self.total, self.successes, self.failures
        );
        if self.total == 0 {
            return out;
        }
        let rate = self.successes as f64 * 100.0 / self.total as f64;
        let _ = writeln!(
            out,
            "success rate {rate:.0}%; duration average {} ms, p95 {} ms",
            self.average_ms, self.p95_ms
        );
        let _ = writeln!(out, "\nBy language:");
        for language in &self.languages {
            let _ = writeln!(
                out,
                "  {:11} {:>9}, {} failed",
                language.language,
                satchel_tools::format::plural(language.total, "run", "runs"),
                language.failures
            );
        }
        if !self.categories.is_empty() {
            let _ = writeln!(out, "\nErrors:");
            for category in &self.categories {
                let _ = writeln!(
                    out,
                    "  {:10} {:4}  e.g. {}",
                    category.category, category.count, category.example.error
                );
                let _ = writeln!(out, "  {:10} {:4}       {}", "", "", category.example.code);
            }
        }
        out
    }
}

impl FailureSummary {
    /// Failures as the text `satchel code failures` and `/codefailures`
    /// show, oldest first.
    pub fn render_all(failures: &[FailureSummary]) -> String {
        use std::fmt::Write as _;
        if failures.is_empty() {
            return "no failed code runs recorded\n".to_owned();
        }
        let mut out = String::new();
        for failure in failures {
            let _ = writeln!(
                out,
                "{}  {} ({})  {}",
                failure.at, failure.language, failure.category, failure.id
            );
            let _ = writeln!(out, "  code:  {}", failure.code);
            let _ = writeln!(out, "  error: {}", failure.error);
        }
        out
    }
}

/// Computes the totals of `executions` (oldest first, as the store lists them).
pub fn code_stats(executions: &[CodeExecution]) -> CodeStats {
    let total = executions.len();
    let failures: Vec<&CodeExecution> = executions.iter().filter(|e| !e.success).collect();
    let mut durations: Vec<u64> = executions.iter().map(|e| e.duration_ms).collect();
    durations.sort_unstable();
    let average_ms = if total == 0 {
        0
    } else {
        durations.iter().sum::<u64>() / total as u64
    };
    // Nearest rank: the smallest duration at or above 95% of the runs.
    let rank = ((total as f64) * 0.95).ceil() as usize;
    let p95_ms = durations.get(rank.saturating_sub(1)).copied().unwrap_or(0);

    let mut categories: Vec<CategoryCount> = Vec::new();
    for failure in failures.iter().rev() {
        let category = failure
            .error_category
            .clone()
            .unwrap_or_else(|| "unknown".into());
        match categories.iter_mut().find(|c| c.category == category) {
            Some(existing) => existing.count += 1,
            None => categories.push(CategoryCount {
                category,
                count: 1,
                example: FailureSummary::of(failure),
            }),
        }
    }
    categories.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.category.cmp(&b.category))
    });

    let mut languages: Vec<LanguageCount> = Vec::new();
    for execution in executions {
        match languages
            .iter_mut()
            .find(|l| l.language == execution.language)
        {
            Some(entry) => {
                entry.total += 1;
                entry.failures += usize::from(!execution.success);
            }
            None => languages.push(LanguageCount {
                language: execution.language.clone(),
                total: 1,
                failures: usize::from(!execution.success),
            }),
        }
    }
    languages.sort_by(|a, b| {
        b.total
            .cmp(&a.total)
            .then_with(|| a.language.cmp(&b.language))
    });
    CodeStats {
        total,
        successes: total - failures.len(),
        failures: failures.len(),
        average_ms,
        p95_ms,
        categories,
        languages,
    }
}
