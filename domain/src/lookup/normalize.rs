//! The search form of a name: upper-case ASCII words, accents and punctuation gone.
//!
//! `"Núñez Cañete, José María"` and `"NUNEZ CANETE JOSE MARIA"` have the same words
//! (`NUNEZ CANETE JOSE MARIA`), so a search ignores case and accents; the words are compared as a
//! multiset where word order must not matter ([`crate::lookup::rank`]).
//!
//! Rules, one character at a time:
//! - ASCII letters and digits are kept (letters upper-cased);
//! - Latin letters with a diacritic lose it (`Á`→`A`, `Ñ`→`N`, `Ü`→`U`, Guaraní `Ẽ`, `Ỹ`, `G̃`
//!   included), ligatures are spelled out (`Æ`→`AE`, `ß`→`SS`), combining marks are dropped;
//! - `.` and apostrophes join (`S.A.` → `SA`, `D'ALESSANDRO` → `DALESSANDRO`, the Guaraní puso
//!   `ʼ` too), so that abbreviations are one word whether or not they are dotted;
//! - every other character separates words;
//! - any other alphanumeric character (another script) is kept, upper-cased.
//!
//! Query and name go through the same function, so whatever it does it does to both.

/// What one character becomes.
enum Fold {
    /// Part of a word, spelled with these upper-case characters.
    Word(&'static str),
    /// Part of a word, as this (upper-cased) character.
    Char(char),
    /// Dropped without ending the word.
    Join,
    /// Ends the word.
    Split,
}

fn fold(c: char) -> Fold {
    use Fold::{Join, Split, Word};
    match c {
        'A'..='Z' | '0'..='9' => Fold::Char(c),
        'a'..='z' => Fold::Char(c.to_ascii_uppercase()),
        '.' | '\'' | '`' | '\u{00B4}' | '\u{2018}' | '\u{2019}' | '\u{02BC}' | '\u{02BB}' => Join,
        '\u{0300}'..='\u{036F}' => Join,
        'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' | 'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'Ā' | 'ā' | 'Ă' | 'ă'
        | 'Ą' | 'ą' | 'ª' => Word("A"),
        'Æ' | 'æ' => Word("AE"),
        'Ç' | 'ç' | 'Ć' | 'ć' | 'Č' | 'č' => Word("C"),
        'Ð' | 'ð' | 'Ď' | 'ď' | 'Đ' | 'đ' => Word("D"),
        'È' | 'É' | 'Ê' | 'Ë' | 'è' | 'é' | 'ê' | 'ë' | 'Ē' | 'ē' | 'Ė' | 'ė' | 'Ę' | 'ę' | 'Ě' | 'ě'
        | 'Ẽ' | 'ẽ' => Word("E"),
        'Ĝ' | 'ĝ' | 'Ğ' | 'ğ' | 'Ģ' | 'ģ' => Word("G"),
        'Ì' | 'Í' | 'Î' | 'Ï' | 'ì' | 'í' | 'î' | 'ï' | 'Ĩ' | 'ĩ' | 'Ī' | 'ī' | 'Į' | 'į' | 'İ' | 'ı' => {
            Word("I")
        }
        'Ł' | 'ł' => Word("L"),
        'Ñ' | 'ñ' | 'Ń' | 'ń' | 'Ň' | 'ň' => Word("N"),
        'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' | 'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'Ō' | 'ō' | 'Ő' | 'ő'
        | 'º' => Word("O"),
        'Œ' | 'œ' => Word("OE"),
        'Ř' | 'ř' => Word("R"),
        'Š' | 'š' | 'Ś' | 'ś' | 'Ş' | 'ş' => Word("S"),
        'ß' => Word("SS"),
        'Ť' | 'ť' => Word("T"),
        'Þ' | 'þ' => Word("TH"),
        'Ù' | 'Ú' | 'Û' | 'Ü' | 'ù' | 'ú' | 'û' | 'ü' | 'Ũ' | 'ũ' | 'Ū' | 'ū' | 'Ů' | 'ů' | 'Ű' | 'ű'
        | 'Ų' | 'ų' => Word("U"),
        'Ý' | 'ý' | 'ÿ' | 'Ÿ' | 'Ỹ' | 'ỹ' => Word("Y"),
        'Ž' | 'ž' | 'Ź' | 'ź' | 'Ż' | 'ż' => Word("Z"),
        c if c.is_alphanumeric() => {
            let mut upper = c.to_uppercase();
            match (upper.next(), upper.next()) {
                (Some(u), None) => Fold::Char(u),
                _ => Fold::Char(c),
            }
        }
        _ => Split,
    }
}

/// Calls `each` with every word of `text` in its search form, in order. `buffer` is scratch
/// space (reused to avoid an allocation per word).
pub fn for_each_word(text: &str, buffer: &mut String, mut each: impl FnMut(&str)) {
    buffer.clear();
    for c in text.chars() {
        match fold(c) {
            Fold::Char(u) => buffer.push(u),
            Fold::Word(s) => buffer.push_str(s),
            Fold::Join => {}
            Fold::Split => {
                if !buffer.is_empty() {
                    each(buffer);
                    buffer.clear();
                }
            }
        }
    }
    if !buffer.is_empty() {
        each(buffer);
        buffer.clear();
    }
}

/// The words of `text` in their search form, in order.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut buffer = String::new();
    for_each_word(text, &mut buffer, |w| out.push(w.to_owned()));
    out
}

/// The search form of a whole text: its words joined by one space.
pub fn normalize(text: &str) -> String {
    words(text).join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn case_accents_and_enye_are_ignored() {
        assert_eq!(normalize("Núñez Cañete, José María"), "NUNEZ CANETE JOSE MARIA");
        assert_eq!(normalize("AGÜERO"), "AGUERO");
        assert_eq!(normalize("ÑANDUTÍ"), "NANDUTI");
    }

    #[test]
    fn guarani_letters_fold_to_their_base_letter() {
        assert_eq!(normalize("Porã Tupã Ỹvy Ẽ"), "PORA TUPA YVY E");
        assert_eq!(normalize("G\u{0303}uasu"), "GUASU");
        assert_eq!(normalize("Ñe\u{02BC}ẽ"), "NEE");
    }

    #[test]
    fn dots_and_apostrophes_join_and_other_punctuation_splits() {
        assert_eq!(normalize("FARMACIA S.A."), "FARMACIA SA");
        assert_eq!(normalize("D'ALESSANDRO, ANA"), "DALESSANDRO ANA");
        assert_eq!(normalize("GONZALEZ,JUAN"), "GONZALEZ JUAN");
        assert_eq!(normalize("A & B | C-D/E"), "A B C D E");
        assert_eq!(normalize("  ... "), "");
    }

    #[test]
    fn ligatures_are_spelled_out() {
        assert_eq!(normalize("Straße Œuvre"), "STRASSE OEUVRE");
    }

    proptest! {
        #[test]
        fn normalizing_is_idempotent(text in "\\PC{0,40}") {
            let once = normalize(&text);
            prop_assert_eq!(normalize(&once), once.clone());
        }

        #[test]
        fn words_never_contain_separators_or_lower_case_ascii(text in "\\PC{0,40}") {
            for word in words(&text) {
                prop_assert!(!word.is_empty());
                prop_assert!(!word.contains(' '));
                prop_assert!(!word.bytes().any(|b| b.is_ascii_lowercase()));
            }
        }
    }
}
