//! The answers table's plain words in Spanish (es-PY), for the console's Spanish pages: each
//! English text of [`super::answers`] and [`super::codes`] with its translation. The English
//! table stays the source; a test holds this one complete.

/// `(English, Spanish)` pairs.
static PAIRS: &[(&str, &str)] = &[
    ("SIFEN approved the document.", "SIFEN aprobó el documento."),
    (
        "Nothing: it is valid; deliver the KuDE to the buyer.",
        "Nada: es válido; entregá el KuDE al cliente.",
    ),
    (
        "SIFEN already holds this CDC as approved: an earlier attempt was approved and its answer was lost \
         on the way.",
        "SIFEN ya tiene este CDC como aprobado: un envío anterior fue aprobado y su respuesta se perdió en \
         el camino.",
    ),
    (
        "kuatia asks SIFEN for the CDC (siConsDE) to take its authorisation; until SIFEN answers that \
         question the document stays submitting or retrying, never rejected.",
        "kuatia consulta el CDC a SIFEN (siConsDE) para obtener su autorización; hasta que SIFEN responda \
         esa consulta, el documento sigue en envío o en reintento, nunca queda rechazado.",
    ),
    (
        "Approved with an observation: it was sent more than 72 hours after it was signed.",
        "Aprobado con observación: se envió más de 72 horas después de firmado.",
    ),
    (
        "Nothing for this document; send documents sooner after issuing them.",
        "Nada para este documento; enviá los documentos más pronto después de emitirlos.",
    ),
    (
        "The issuer's RUC is not enabled for SIFEN's synchronous service.",
        "El RUC del emisor no está habilitado para el servicio sincrónico de SIFEN.",
    ),
    (
        "Ask DNIT to enable it, or send in lots.",
        "Pedí a la DNIT que lo habilite, o enviá en lotes.",
    ),
    (
        "SIFEN rejected the document under one of its rules on the DE's fields (§12.4; SIFEN's message names \
         the field).",
        "SIFEN rechazó el documento por una de sus reglas sobre los campos del DE (§12.4; el mensaje de \
         SIFEN nombra el campo).",
    ),
    (
        "Correct what SIFEN names and issue the document again as a new document.",
        "Corregí lo que SIFEN señala y emití el documento de nuevo como un documento nuevo.",
    ),
    (
        "The signed document is larger than SIFEN accepts (1000 KB).",
        "El documento firmado es más grande de lo que SIFEN acepta (1000 KB).",
    ),
    (
        "Issue it again with fewer or shorter items.",
        "Emitilo de nuevo con menos ítems o con ítems más cortos.",
    ),
    (
        "The lot was larger than SIFEN accepts; nothing was processed.",
        "El lote era más grande de lo que SIFEN acepta; no se procesó nada.",
    ),
    (
        "Each document of the lot is retried alone, after asking SIFEN for its CDC.",
        "Cada documento del lote se reintenta por separado, después de consultar su CDC a SIFEN.",
    ),
    (
        "SIFEN received the lot and queued it for processing.",
        "SIFEN recibió el lote y lo puso en cola para procesarlo.",
    ),
    (
        "Nothing: kuatia asks for the lot's result, and never sends its CDCs while it is processing.",
        "Nada: kuatia consulta el resultado del lote y nunca envía sus CDC mientras se está procesando.",
    ),
    (
        "SIFEN did not queue the lot. Usually: the same CDC was sent again while a result was still pending, \
         a lot mixed document types or issuers, or held more than 50 documents; SIFEN then blocks the \
         issuer's sending for 10 to 60 minutes.",
        "SIFEN no puso el lote en cola. Por lo general: se volvió a enviar el mismo CDC mientras un \
         resultado seguía pendiente, un lote mezcló tipos de documento o emisores, o tenía más de 50 \
         documentos; SIFEN entonces bloquea los envíos del emisor de 10 a 60 minutos.",
    ),
    (
        "Wait for the block to pass; kuatia queries each CDC before sending again and never resends an \
         approved one.",
        "Esperá a que pase el bloqueo; kuatia consulta cada CDC antes de volver a enviar y nunca reenvía uno \
         aprobado.",
    ),
    (
        "SIFEN could not read the question.",
        "SIFEN no pudo leer la consulta.",
    ),
    ("kuatia asks again later.", "kuatia vuelve a consultar más tarde."),
    (
        "Only the RUC that sent a lot may ask for its result: the connection's certificate changed.",
        "Solo el RUC que envió un lote puede consultar su resultado: cambió el certificado de la conexión.",
    ),
    (
        "kuatia asks again later; point the channel back at the certificate that sent the lot.",
        "kuatia vuelve a consultar más tarde; volvé a apuntar el canal al certificado que envió el lote.",
    ),
    (
        "SIFEN holds no such lot (asked by CDC: no lot holds the CDC).",
        "SIFEN no tiene ese lote (consultado por CDC: ningún lote contiene el CDC).",
    ),
    (
        "Asked by number: each document of the lot is retried, asking SIFEN for its CDC first. Asked by CDC \
         after siConsDE's 0420: the document is sent again.",
        "Consultado por número: cada documento del lote se reintenta, consultando antes su CDC a SIFEN. \
         Consultado por CDC después del 0420 de siConsDE: el documento se vuelve a enviar.",
    ),
    (
        "SIFEN is still processing the lot (at busy times for hours).",
        "SIFEN todavía está procesando el lote (en momentos de mucha carga, durante horas).",
    ),
    (
        "Nothing: kuatia asks again after the poll interval and never sends its CDCs meanwhile.",
        "Nada: kuatia vuelve a consultar después del intervalo de consulta y mientras tanto nunca envía sus \
         CDC.",
    ),
    (
        "SIFEN finished the lot: each document's entry carries its own verdict (read as siRecepDE's).",
        "SIFEN terminó el lote: la entrada de cada documento trae su propio veredicto (leído como el de \
         siRecepDE).",
    ),
    (
        "kuatia records each document's verdict; a document the lot does not list is asked for again later.",
        "kuatia registra el veredicto de cada documento; un documento que no figura en el lote se vuelve a \
         consultar más tarde.",
    ),
    (
        "SIFEN refused the lot whole (documents of different types); none was processed.",
        "SIFEN rechazó el lote entero (documentos de tipos distintos); no se procesó ninguno.",
    ),
    (
        "The lot is older than 48 hours and can no longer be asked for.",
        "El lote tiene más de 48 horas y ya no se puede consultar.",
    ),
    (
        "Each document of the lot is asked for by CDC (siConsDE) and recorded from that answer.",
        "Cada documento del lote se consulta por CDC (siConsDE) y se registra según esa respuesta.",
    ),
    (
        "SIFEN does not hold the document as approved.",
        "SIFEN no tiene el documento como aprobado.",
    ),
    (
        "Nothing while kuatia is still sending it: it is sent again only if no lot holding it is processing. \
         After a rejection, correct and issue again.",
        "Nada mientras kuatia lo siga enviando: se vuelve a enviar solo si no se está procesando ningún lote \
         que lo contenga. Después de un rechazo, corregí y emití de nuevo.",
    ),
    (
        "The Manual gives 0421 two meanings (no permission to ask; found), so it settles nothing.",
        "El Manual le da dos significados al 0421 (sin permiso para consultar; encontrado), así que no \
         resuelve nada.",
    ),
    (
        "kuatia asks again later and concludes nothing from it.",
        "kuatia vuelve a consultar más tarde y no concluye nada de eso.",
    ),
    (
        "SIFEN has the document as approved (found when kuatia asked for its CDC).",
        "SIFEN tiene el documento como aprobado (encontrado cuando kuatia consultó su CDC).",
    ),
    (
        "Nothing: an earlier attempt was approved and its answer was lost on the way; kuatia records the \
         approval with SIFEN's authorisation.",
        "Nada: un envío anterior fue aprobado y su respuesta se perdió en el camino; kuatia registra la \
         aprobación con la autorización de SIFEN.",
    ),
    ("Ask again later.", "Consultá de nuevo más tarde."),
    (
        "SIFEN has no taxpayer with that RUC.",
        "SIFEN no tiene ningún contribuyente con ese RUC.",
    ),
    ("Check the RUC.", "Revisá el RUC."),
    (
        "The connection's certificate may not ask for taxpayers.",
        "El certificado de la conexión no tiene permiso para consultar contribuyentes.",
    ),
    (
        "Ask again later, or with another certificate.",
        "Consultá de nuevo más tarde, o con otro certificado.",
    ),
    ("SIFEN found the taxpayer.", "SIFEN encontró al contribuyente."),
    ("Nothing.", "Nada."),
    (
        "The event is larger than SIFEN accepts.",
        "El evento es más grande de lo que SIFEN acepta.",
    ),
    (
        "Shorten the reason and ask again.",
        "Acortá el motivo y volvé a pedirlo.",
    ),
    (
        "SIFEN registered the event (the cancelación or inutilización holds).",
        "SIFEN registró el evento (la cancelación o la inutilización queda firme).",
    ),
    (
        "SIFEN already holds this cancelación: an earlier request was registered and its answer lost.",
        "SIFEN ya tiene esta cancelación: un pedido anterior se registró y su respuesta se perdió.",
    ),
    (
        "Nothing: kuatia records the document as cancelled.",
        "Nada: kuatia registra el documento como cancelado.",
    ),
    (
        "SIFEN already holds this number as inutilised: an earlier request was registered and its answer \
         lost.",
        "SIFEN ya tiene este número como inutilizado: un pedido anterior se registró y su respuesta se \
         perdió.",
    ),
    (
        "Nothing: kuatia records the number as inutilised.",
        "Nada: kuatia registra el número como inutilizado.",
    ),
    (
        "SIFEN refused the event under one of its rules (SIFEN's message says which).",
        "SIFEN rechazó el evento por una de sus reglas (el mensaje de SIFEN dice cuál).",
    ),
    (
        "Correct what SIFEN names and ask again (POST /cancel or /inutilize).",
        "Corregí lo que SIFEN señala y volvé a pedirlo (POST /cancel o /inutilize).",
    ),
    (
        "SIFEN refused the connection's certificate; nothing was processed.",
        "SIFEN rechazó el certificado de la conexión; no se procesó nada.",
    ),
    (
        "Renew or replace the channel's certificate; kuatia keeps asking on its schedule meanwhile.",
        "Renová o reemplazá el certificado del canal; mientras tanto kuatia sigue consultando según su \
         calendario.",
    ),
    (
        "SIFEN could not read the message's structure.",
        "SIFEN no pudo leer la estructura del mensaje.",
    ),
    (
        "SIFEN could not read the message's structure; nothing was judged.",
        "SIFEN no pudo leer la estructura del mensaje; no se evaluó nada.",
    ),
    (
        "Nothing: kuatia retries on its schedule (30 s, 2 min, 10 min, … up to 60 h after signing), asking \
         SIFEN for the CDC before anything is sent again; POST /retry tries now.",
        "Nada: kuatia reintenta según su calendario (30 s, 2 min, 10 min, … hasta 60 h después de la firma), \
         consultando el CDC a SIFEN antes de volver a enviar nada; POST /retry reintenta ahora.",
    ),
    (
        "SIFEN refused the certificate that signed the document.",
        "SIFEN rechazó el certificado que firmó el documento.",
    ),
    (
        "Check the company's certificate (GET /v1/certificates, validate) and issue again.",
        "Revisá el certificado de la empresa (GET /v1/certificates, validate) y emití de nuevo.",
    ),
    (
        "SIFEN refused a certificate; nothing was judged.",
        "SIFEN rechazó un certificado; no se evaluó nada.",
    ),
    (
        "The signature does not follow SIFEN's standard (reference, transforms).",
        "La firma no sigue el estándar de SIFEN (referencia, transformaciones).",
    ),
    (
        "The signature does not verify: the document changed after it was signed, or the certificate does \
         not match the key.",
        "La firma no verifica: el documento cambió después de firmado, o el certificado no corresponde a la \
         clave.",
    ),
    (
        "The certificate that signed belongs to another RUC than the issuer's.",
        "El certificado que firmó pertenece a otro RUC, no al del emisor.",
    ),
    (
        "Upload the issuing company's own certificate and point the sifen channel at it.",
        "Subí el certificado propio de la empresa emisora y apuntá el canal sifen a ese certificado.",
    ),
    (
        "SIFEN refused a signature; nothing was judged.",
        "SIFEN rechazó una firma; no se evaluó nada.",
    ),
    (
        "SIFEN could not read the XML: it is not well-formed or carries characters SIFEN refuses (line \
         breaks, tabs or control characters in a name, an address or a description).",
        "SIFEN no pudo leer el XML: no está bien formado o lleva caracteres que SIFEN rechaza (saltos de \
         línea, tabulaciones o caracteres de control en un nombre, una dirección o una descripción).",
    ),
    (
        "Correct the text fields of the document and issue it again as a new document.",
        "Corregí los campos de texto del documento y emitilo de nuevo como un documento nuevo.",
    ),
    (
        "SIFEN could not read the question or the lot; nothing was judged.",
        "SIFEN no pudo leer la consulta o el lote; no se evaluó nada.",
    ),
    (
        "SIFEN's processing servers were unavailable; nothing was processed.",
        "Los servidores de procesamiento de SIFEN no estaban disponibles; no se procesó nada.",
    ),
    (
        "SIFEN's processing servers were stopped; nothing was processed.",
        "Los servidores de procesamiento de SIFEN estaban detenidos; no se procesó nada.",
    ),
    (
        "SIFEN does not support the message's format version.",
        "SIFEN no admite la versión de formato del mensaje.",
    ),
    (
        "SIFEN does not support the message's format version; nothing was judged.",
        "SIFEN no admite la versión de formato del mensaje; no se evaluó nada.",
    ),
    (
        "SIFEN refused the message's header.",
        "SIFEN rechazó el encabezado del mensaje.",
    ),
    (
        "SIFEN refused the message's header; nothing was judged.",
        "SIFEN rechazó el encabezado del mensaje; no se evaluó nada.",
    ),
    (
        "The connection's certificate belongs to a RUC SIFEN does not hold as active; nothing was processed.",
        "El certificado de la conexión pertenece a un RUC que SIFEN no tiene como activo; no se procesó \
         nada.",
    ),
    (
        "Check the certificate and the taxpayer's state with DNIT; kuatia keeps asking on its schedule.",
        "Revisá con la DNIT el certificado y el estado del contribuyente; kuatia sigue consultando según su \
         calendario.",
    ),
    (
        "SIFEN could not be reached (the connection was refused or its host not found): nothing was sent.",
        "No se pudo llegar a SIFEN (la conexión fue rechazada o no se encontró su servidor): no se envió \
         nada.",
    ),
    (
        "SIFEN could not be reached in time (connecting or the TLS handshake timed out): nothing was sent.",
        "No se pudo llegar a SIFEN a tiempo (se agotó el tiempo de conexión o de la negociación TLS): no se \
         envió nada.",
    ),
    (
        "The secure connection to SIFEN failed (a certificate or TLS refusal): nothing was sent.",
        "Falló la conexión segura con SIFEN (rechazo de un certificado o de TLS): no se envió nada.",
    ),
    (
        "The document was sent but SIFEN's answer did not come in time: SIFEN may have processed it.",
        "El documento se envió pero la respuesta de SIFEN no llegó a tiempo: SIFEN puede haberlo procesado.",
    ),
    (
        "SIFEN (or a proxy before it) answered with something that is not a SOAP answer: it may have \
         processed the document.",
        "SIFEN (o un proxy delante de él) respondió con algo que no es una respuesta SOAP: puede haber \
         procesado el documento.",
    ),
    (
        "SIFEN answered with a server error (HTTP 5xx): it may have processed the document.",
        "SIFEN respondió con un error del servidor (HTTP 5xx): puede haber procesado el documento.",
    ),
    (
        "SIFEN answered with a SOAP Fault: it may have processed the document.",
        "SIFEN respondió con un SOAP Fault: puede haber procesado el documento.",
    ),
    (
        "SIFEN answered, but not with the answer of the operation asked: it may have processed the document.",
        "SIFEN respondió, pero no con la respuesta de la operación pedida: puede haber procesado el \
         documento.",
    ),
    (
        "Nothing was sent: kuatia tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 \
         h after signing (`POST /v1/documents/{id}/retry` tries at once). Nothing to do unless it lasts: \
         then check the channel's endpoint and SIFEN's service status.",
        "No se envió nada: kuatia vuelve a intentar a los 30 s, 2 min, 10 min, 30 min, 1 h, luego cada 2 h, \
         hasta 60 h después de la firma (`POST /v1/documents/{id}/retry` lo intenta de inmediato). No hay \
         nada que hacer salvo que persista: entonces revisá el endpoint del canal y el estado del servicio \
         de SIFEN.",
    ),
    (
        "Nothing was sent: kuatia tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 \
         h after signing (`POST /v1/documents/{id}/retry` tries at once). Check the channel's certificate \
         (and its chain) if it lasts.",
        "No se envió nada: kuatia vuelve a intentar a los 30 s, 2 min, 10 min, 30 min, 1 h, luego cada 2 h, \
         hasta 60 h después de la firma (`POST /v1/documents/{id}/retry` lo intenta de inmediato). Si \
         persiste, revisá el certificado del canal (y su cadena).",
    ),
    (
        "SIFEN may have processed it: before anything is sent again kuatia asks SIFEN for the CDC, then \
         tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after signing (`POST \
         /v1/documents/{id}/retry` tries at once); the same CDC is never sent twice. Nothing to do unless it \
         lasts.",
        "SIFEN puede haberlo procesado: antes de volver a enviar nada, kuatia consulta el CDC a SIFEN y \
         después vuelve a intentar a los 30 s, 2 min, 10 min, 30 min, 1 h, luego cada 2 h, hasta 60 h \
         después de la firma (`POST /v1/documents/{id}/retry` lo intenta de inmediato); el mismo CDC nunca \
         se envía dos veces. No hay nada que hacer salvo que persista.",
    ),
    (
        "A code the table does not list is an operational failure: kuatia asks again later and concludes \
         nothing from it.",
        "Un código que no figura en la tabla es una falla operativa: kuatia vuelve a consultar más tarde y \
         no concluye nada de él.",
    ),
    (
        "SIFEN answered with a code kuatia's table of SIFEN's answers does not list.",
        "SIFEN respondió con un código que no figura en la tabla de respuestas de SIFEN de kuatia.",
    ),
];

/// The Spanish of one of the table's English texts; `None` for a text it does not hold.
pub fn spanish(english: &str) -> Option<&'static str> {
    PAIRS.iter().find(|(en, _)| *en == english).map(|(_, es)| *es)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::super::{answers, codes};

    use super::*;

    /// What [`codes::explain`] says of a four-digit code the answers table does not list.
    const UNLISTED_MEANING: &str =
        "SIFEN answered with a code kuatia's table of SIFEN's answers does not list.";

    /// Every English text the console may show: each row's plain words and action, each
    /// transport outcome's, and the words for a code the table does not list.
    fn english_texts() -> Vec<&'static str> {
        let mut texts = Vec::new();
        for row in answers::ROWS {
            texts.push(row.plain);
            texts.push(row.action);
        }
        for t in answers::Transport::ALL {
            texts.push(t.plain());
            texts.push(t.action());
        }
        texts.push(answers::UNLISTED);
        texts.push(UNLISTED_MEANING);
        texts
    }

    #[test]
    fn every_plain_word_of_the_answers_table_has_its_spanish() {
        for row in answers::ROWS {
            let operations: Vec<&str> = row.operations.iter().map(|op| op.name()).collect();
            assert!(
                spanish(row.plain).is_some(),
                "{} ({}): no Spanish for the plain words {:?}",
                row.codes(),
                operations.join(", "),
                row.plain
            );
            assert!(
                spanish(row.action).is_some(),
                "{} ({}): no Spanish for the action {:?}",
                row.codes(),
                operations.join(", "),
                row.action
            );
        }
        for t in answers::Transport::ALL {
            assert!(
                spanish(t.plain()).is_some(),
                "{t:?}: no Spanish for {:?}",
                t.plain()
            );
            assert!(
                spanish(t.action()).is_some(),
                "{t:?}: no Spanish for {:?}",
                t.action()
            );
        }
        assert!(
            spanish(answers::UNLISTED).is_some(),
            "no Spanish for {:?}",
            answers::UNLISTED
        );
        assert!(
            spanish(UNLISTED_MEANING).is_some(),
            "no Spanish for {UNLISTED_MEANING:?}"
        );
        let unlisted = codes::explain("9999").expect("a four-digit code is explained");
        assert_eq!(unlisted.meaning, UNLISTED_MEANING);
        assert!(
            spanish(unlisted.action).is_some(),
            "no Spanish for {:?}",
            unlisted.action
        );
    }

    #[test]
    fn no_spanish_is_empty_and_no_english_repeats() {
        let mut seen = HashSet::new();
        for (en, es) in PAIRS {
            assert!(!es.trim().is_empty(), "empty Spanish for {en:?}");
            assert!(!en.trim().is_empty(), "an empty English key");
            assert!(seen.insert(*en), "English repeated: {en:?}");
        }
    }

    #[test]
    fn every_pair_translates_a_text_of_the_table() {
        let texts = english_texts();
        for (en, _) in PAIRS {
            assert!(
                texts.contains(en),
                "no longer a text of the answers table: {en:?}"
            );
        }
    }
}
