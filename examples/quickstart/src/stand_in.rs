//! [`OfflineStandInModel`]: a stand-in for a real chat model, for running offline.

use agent_memory::{ChatMessage, ChatModel, ChatRequest, ChatResponse, Result, Role, async_trait};

/// Not a language model: a few fixed rules that answer from the messages it is sent, so the
/// quickstart runs with no network and no key, and shows what memory gives a model.
///
/// It plays two parts, told apart by the instructions it is sent:
///
/// - **The fact-extraction model** of the memory's `FactExtractionMemoryBlock`**: asked for
///   `<facts>`, it restates each first-person statement of the user's new messages in the third
///   person ("My name is Dana" becomes "The user's name is Dana."; "Please remember that X"
///   becomes "X."), leaves out the facts it was told are known, and answers in the
///   `<facts><fact>…</fact></facts>` form the block parses. Asked to condense, it keeps the
///   newest facts.
/// - **The assistant**: it answers "what is my name", "which service paged me" and "what is
///   still open" from what it was sent — the user's earlier messages in the history window and
///   the facts inside the `<memory>` text of the instructions — says which of the two it read,
///   and says so when neither holds the answer. Anything else is acknowledged.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OfflineStandInModel;

/// Where the fact block's prompts ask for their answer form (both the extract and the condense
/// prompt say it).
const FACTS_FORMAT: &str = "Answer with <facts>";

#[async_trait]
impl ChatModel for OfflineStandInModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let instructions = texts(request, |role| role == Role::System).join("\n");
        let last_user = texts(request, |role| role == Role::User)
            .pop()
            .unwrap_or_default();
        let reply = if instructions.contains(FACTS_FORMAT) {
            if instructions.trim_start().starts_with("Condense") {
                condense(&instructions, &last_user)
            } else {
                extract(&last_user)
            }
        } else {
            answer(request)
        };
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant(reply)],
            ..ChatResponse::default()
        })
    }
}

/// The texts of the request's messages whose role passes `keep`, in order.
fn texts(request: &ChatRequest, keep: impl Fn(Role) -> bool) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| keep(m.role))
        .map(ChatMessage::text)
        .collect()
}

/// Answers the fact block's extraction prompt: "Known facts: <facts>…</facts> New messages:
/// <message role='…'>…</message>…".
fn extract(prompt: &str) -> String {
    let (known_part, new_part) = prompt.split_once("New messages:").unwrap_or(("", prompt));
    let known = tagged(known_part, "<fact>", "</fact>");
    let mut facts: Vec<String> = Vec::new();
    for text in tagged(new_part, "<message role='user'>", "</message>") {
        for fact in statements(&text) {
            if !known.contains(&fact) && !facts.contains(&fact) {
                facts.push(fact);
            }
        }
    }
    fact_list(&facts)
}

/// Answers the fact block's condense prompt ("… into at most N facts …"): the newest N facts.
fn condense(instructions: &str, prompt: &str) -> String {
    let facts = tagged(prompt, "<fact>", "</fact>");
    let max = instructions
        .split_once("at most ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(facts.len());
    fact_list(
        facts
            .get(facts.len().saturating_sub(max)..)
            .unwrap_or_default(),
    )
}

fn fact_list(facts: &[String]) -> String {
    let items: String = facts.iter().map(|f| format!("<fact>{f}</fact>")).collect();
    format!("<facts>{items}</facts>")
}

/// Answers the assistant's question from the window and the memory it was sent.
fn answer(request: &ChatRequest) -> String {
    let users = texts(request, |role| role == Role::User);
    let question = users.last().map(|q| q.to_lowercase()).unwrap_or_default();
    // What the conversation still shows: the user's earlier statements, in the third person.
    let window: Vec<String> = users
        .get(..users.len().saturating_sub(1))
        .unwrap_or_default()
        .iter()
        .flat_map(|t| statements(t))
        .collect();
    // What the memory holds: the facts of the `<memory>` text in the instructions.
    let remembered: Vec<String> = texts(request, |role| role == Role::System)
        .iter()
        .filter_map(|t| t.split_once("<memory>").map(|(_, m)| m.to_owned()))
        .flat_map(|m| tagged(&m, "<fact>", "</fact>"))
        .collect();
    let find = |test: &dyn Fn(&str) -> bool| -> Option<(&str, &str)> {
        let in_window = window.iter().find(|f| test(&f.to_lowercase()));
        let in_memory = remembered.iter().find(|f| test(&f.to_lowercase()));
        in_window
            .map(|f| (f.as_str(), "from our conversation"))
            .or_else(|| in_memory.map(|f| (f.as_str(), "from the memory I was sent")))
    };
    let asked = question.trim_end().ends_with('?');
    if asked && question.contains("what is my name") {
        match find(&|f| f.contains("the user's name is ")) {
            Some((fact, source)) => match word_after(fact, "the user's name is ") {
                Some(name) => format!("Your name is {name} ({source})."),
                None => "I can't read your name in what I was sent.".to_owned(),
            },
            None => "I don't know your name: it is neither in the messages nor in the memory I \
                     was sent."
                .to_owned(),
        }
    } else if asked && question.contains("which service paged") {
        match find(&|f| f.contains(" service paged the user")) {
            Some((fact, source)) => format!("{} ({source}).", second_person(fact)),
            None => "I can't tell: the page is neither in the messages nor in the memory I was \
                     sent."
                .to_owned(),
        }
    } else if asked && (question.contains("still open") || question.contains("due")) {
        match find(&|f| f.contains(" is due ")) {
            Some((fact, source)) => format!("Still open: {} ({source}).", lower_first(fact)),
            None => {
                "Nothing open that I can see in the messages or the memory I was sent.".to_owned()
            }
        }
    } else {
        let facts = match remembered.len() {
            1 => "1 remembered fact".to_owned(),
            n => format!("{n} remembered facts"),
        };
        format!(
            "Noted. (I was sent {} messages, with {facts}.)",
            request.messages.len()
        )
    }
}

/// The user's statements in `text`, restated in the third person, one sentence each:
/// questions and sentences that say nothing about the user are left out.
fn statements(text: &str) -> Vec<String> {
    sentences(text)
        .into_iter()
        .filter_map(third_person)
        .collect()
}

/// `text` cut after each `.`, `!` or `?` that ends a sentence.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let at_end = chars.peek().is_none_or(|(_, next)| next.is_whitespace());
        if matches!(c, '.' | '!' | '?') && at_end {
            let sentence = text[start..=i].trim();
            if !sentence.is_empty() {
                out.push(sentence);
            }
            start = i.saturating_add(c.len_utf8());
        }
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// "My name is Dana and I am on call." → "The user's name is Dana and the user is on call.";
/// "Please remember that the postmortem is due." → "The postmortem is due."; `None` for a
/// question or a sentence without "I", "me" or "my" that the user did not ask to remember.
fn third_person(sentence: &str) -> Option<String> {
    if sentence.ends_with('?') {
        return None;
    }
    let body = sentence.trim_end_matches(['.', '!']);
    let lower = body.to_lowercase();
    let (body, remembered) = ["please remember that ", "remember that "]
        .iter()
        .find(|p| lower.starts_with(*p))
        .map_or((body, false), |p| (&body[p.len()..], true));
    let words: Vec<&str> = body.split_whitespace().collect();
    let mut out: Vec<String> = Vec::new();
    let mut about_user = false;
    let mut i = 0;
    while let Some(&word) = words.get(i) {
        let core = word.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        let tail = &word[core.len()..];
        let following = words.get(i.saturating_add(1)).copied();
        let next = following.map(str::to_lowercase);
        let (replacement, skip) = match (core.to_lowercase().as_str(), next.as_deref()) {
            ("i", Some("am")) => ("the user is", 1),
            ("i'm", _) => ("the user is", 0),
            ("i", Some("have")) => ("the user has", 1),
            ("i", _) | ("me", _) => ("the user", 0),
            ("my", _) => ("the user's", 0),
            _ => ("", 0),
        };
        if replacement.is_empty() {
            out.push(word.to_owned());
        } else {
            about_user = true;
            let skipped_tail = if skip == 1 {
                following
                    .unwrap_or_default()
                    .trim_start_matches(char::is_alphanumeric)
            } else {
                tail
            };
            out.push(format!("{replacement}{skipped_tail}"));
        }
        i = i.saturating_add(1).saturating_add(skip);
    }
    if !(about_user || remembered) || out.is_empty() {
        return None;
    }
    Some(format!("{}.", upper_first(&out.join(" "))))
}

/// A fact about "the user" said to the user: "The billing service paged the user at 02:13."
/// → "The billing service paged you at 02:13".
fn second_person(fact: &str) -> String {
    let said = fact
        .trim_end_matches('.')
        .replace("the user's", "your")
        .replace("The user's", "Your")
        .replace("the user is", "you are")
        .replace("The user is", "You are")
        .replace("the user has", "you have")
        .replace("The user has", "You have")
        .replace("the user", "you")
        .replace("The user", "You");
    upper_first(&said)
}

fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn lower_first(text: &str) -> String {
    let text = text.trim_end_matches('.');
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The texts between each `open` and the next `close` in `text`, trimmed, empty ones left out.
fn tagged(text: &str, open: &str, close: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((_, after)) = rest.split_once(open) {
        let Some((item, next)) = after.split_once(close) else {
            break;
        };
        let item = item.trim();
        if !item.is_empty() {
            out.push(item.to_owned());
        }
        rest = next;
    }
    out
}

/// The word that follows `marker` in `text` (case-insensitive), without punctuation.
fn word_after(text: &str, marker: &str) -> Option<String> {
    let at = text
        .to_lowercase()
        .find(marker)?
        .saturating_add(marker.len());
    let word: String = text
        .get(at..)?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '-')
        .collect();
    (!word.is_empty()).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restates_the_users_statements_in_the_third_person() {
        assert_eq!(
            statements("Hi! My name is Dana and I am on call this week."),
            ["The user's name is Dana and the user is on call this week."]
        );
        assert_eq!(
            statements("The billing service paged me at 02:13 UTC for a slow query."),
            ["The billing service paged the user at 02:13 UTC for a slow query."]
        );
        assert_eq!(
            statements("Please remember that the postmortem is due on Friday."),
            ["The postmortem is due on Friday."]
        );
        assert!(statements("What is my name?").is_empty());
        assert!(statements("Thanks, the weather is nice.").is_empty());
    }

    #[test]
    fn extracts_only_new_facts_in_the_blocks_form() {
        let prompt = "Known facts:\n<facts>\n<fact>The user's name is Dana.</fact>\n</facts>\n\n\
                      New messages:\n<message role='user'>My name is Dana.</message>\n\
                      <message role='assistant'>My name is Bot.</message>\n\
                      <message role='user'>Remember that the report is due on Monday.</message>";
        assert_eq!(
            extract(prompt),
            "<facts><fact>The report is due on Monday.</fact></facts>"
        );
        assert_eq!(
            extract("Known facts:\n<facts>\n\n</facts>\n\nNew messages:\n"),
            "<facts></facts>"
        );
    }

    #[test]
    fn condenses_to_the_newest_facts() {
        let prompt = "<facts>\n<fact>a</fact>\n<fact>b</fact>\n<fact>c</fact>\n</facts>";
        assert_eq!(
            condense("Condense the facts below into at most 2 facts", prompt),
            "<facts><fact>b</fact><fact>c</fact></facts>"
        );
    }

    #[tokio::test]
    async fn answers_from_the_memory_text_it_is_sent() {
        let request = |memory: &str| ChatRequest {
            messages: vec![
                ChatMessage::system(format!("Be brief.\n\n{memory}")),
                ChatMessage::user("What is my name?"),
            ],
            ..ChatRequest::default()
        };
        let with = request(
            "<memory>\n<facts_block>\n<fact>The user's name is Noor.</fact>\n</facts_block>\n</memory>",
        );
        let reply = OfflineStandInModel.complete(&with).await.unwrap().messages[0].text();
        assert_eq!(reply, "Your name is Noor (from the memory I was sent).");
        let without = request("");
        let reply = OfflineStandInModel
            .complete(&without)
            .await
            .unwrap()
            .messages[0]
            .text();
        assert!(reply.starts_with("I don't know your name"), "{reply}");
    }
}
