//! SIFEN v150's facts that intake and the DE builder both rely on, each kept once: the code tables
//! whose descriptions a DE writes next to each code, the ranges of its codes, the limits of its
//! numeric types, its rounding and the literals it requires.
//!
//! Intake validation ([`crate::document::validation`]) checks a canonical document against these
//! facts and [`super::de`] writes the DE from them, so what intake accepts is what the builder
//! writes. Each item says where it comes from: a field of SIFEN's Manual Técnico v150 by its id
//! (`E011`), one of the Manual's tables ("Tabla 5"), or a type of the XSD it publishes
//! (`tMontoBase`). Descriptions are spelt as the XSD spells them, which is what SIFEN compares.
//!
//! Pure data and lookups: no IO.

use std::ops::RangeInclusive;

use rust_decimal::{Decimal, RoundingStrategy};

// ---------------------------------------------------------------------------------------------
// Literals.

/// `dNomEmi` in SIFEN's test environment, which the Manual requires there instead of the issuer's
/// name (D105, rule 1263); production refuses it.
pub const TEST_ISSUER_NAME: &str = "DE generado en ambiente de prueba - sin valor comercial ni fiscal";

/// The guaraní's code (`cMoneOpe`, D015), the only currency kuatia writes.
pub const CURRENCY: &str = "PYG";

/// The guaraní's description (`dDesMoneOpe`, D016).
pub const CURRENCY_NAME: &str = "Guarani";

/// Paraguay's code in the table of countries (`cPaisRec`, D203; "Tabla 4", ISO 3166 alpha-3).
pub const PARAGUAY: &str = "PRY";

// ---------------------------------------------------------------------------------------------
// Limits and rounding.

/// A DE has 1 to 999 lines (`gCamItem`, E700).
pub const MAX_ITEMS: usize = 999;

/// Amounts stay below 10^15: `tMontoBase`, 1 to 15 integer digits and up to 8 decimals
/// (`dPUniProSer` E721, `dTotGralOpe` F014).
pub const AMOUNT_LIMIT: i64 = 1_000_000_000_000_000;

/// Quantities stay below 10^10 (`dCantProSer`, E711: up to 10 integer digits; `tdCantProSer`).
pub const QUANTITY_LIMIT: i64 = 10_000_000_000;

/// Decimal places of amounts (`tMontoBase`) and of quantities (`tdCantProSer`).
pub const MAX_DECIMALS: u32 = 8;

/// `value` rounded to whole guaraníes, halves away from zero (2.5 → 3, −2.5 → −3): the rounding
/// of the figures a DE derives in guaraníes (a line's total from quantity × unit price, its IVA).
pub fn half_up(value: Decimal) -> Decimal {
    half_up_to(value, 0)
}

/// `value` rounded to `decimals` places, halves away from zero.
pub fn half_up_to(value: Decimal, decimals: u32) -> Decimal {
    value.round_dp_with_strategy(decimals, RoundingStrategy::MidpointAwayFromZero)
}

/// The rates of IVA, in percent (`dTasaIVA`, E734: 0, 5 or 10).
pub const IVA_RATES: [u8; 3] = [0, 5, 10];

/// The rate of IVA `value` is, if it is one of [`IVA_RATES`].
pub fn iva_rate(value: Decimal) -> Option<u8> {
    IVA_RATES.into_iter().find(|r| Decimal::from(*r) == value)
}

// ---------------------------------------------------------------------------------------------
// Lengths of texts.

/// How many characters a text field takes: `min` to `max` (blanks around do not count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Length {
    /// The fewest.
    pub min: usize,
    /// The most.
    pub max: usize,
}

/// The name of the issuer or of the receiver (`dNomEmi` D105, `dNomRec` D211).
pub const NAME: Length = Length { min: 4, max: 255 };

/// A trade name (`dNomFanEmi` D106, `dNomFanRec` D212).
pub const TRADE_NAME: Length = Length { min: 4, max: 255 };

/// A street address (`dDirEmi` D107, `dDirRec` D213).
pub const ADDRESS: Length = Length { min: 1, max: 255 };

/// The name of the person an autofactura buys from (`dNomVen` E307).
pub const SELLER_NAME: Length = Length { min: 4, max: 60 };

/// The bank of a cheque (`dBcoEmi` E632).
pub const CHECK_BANK: Length = Length { min: 4, max: 20 };

/// A line's own code (`dCodInt` E701: the Manual's table says 20 characters, the XSD takes 50).
pub const ITEM_CODE: Length = Length { min: 1, max: 50 };

/// The number of an identity document: 1 to 20 letters, digits or dashes (`dNumIDRec` D210).
pub const ID_NUMBER: Length = Length { min: 1, max: 20 };

/// A house number: 1 to 6 digits, 0 when the house has none (`dNumCas` D108, `dNumCasRec` D218).
pub const HOUSE_NUMBER: Length = Length { min: 1, max: 6 };

/// A cheque's number: 1 to 8 digits, written with 8 (`dNumCheq` E631).
pub const CHECK_NUMBER: Length = Length { min: 1, max: 8 };

/// Digits of a timbrado (`dNumTim` C004, `dNTimDI` H005).
pub const TIMBRADO_DIGITS: usize = 8;

/// Digits of an establishment's or an issuance point's code (`dEst` C005, `dPunExp` C006,
/// `dEstDocAso` H006, `dPExpDocAso` H007).
pub const ESTABLISHMENT_DIGITS: usize = 3;

/// Digits of a document's number (`dNumDoc` C007, `dNumDocAso` H008).
pub const NUMBER_DIGITS: usize = 7;

/// Digits of a constancia's number (`dNumCons` H016).
pub const CONSTANCIA_NUMBER_DIGITS: usize = 11;

/// Characters of a constancia's control code (`dNumControl` H017).
pub const CONSTANCIA_CONTROL_LENGTH: usize = 8;

// ---------------------------------------------------------------------------------------------
// Code tables: (code, description).

/// The codes of a table, in its order.
const fn codes_of<const N: usize>(table: &[(u8, &str); N]) -> [u8; N] {
    let mut codes = [0; N];
    let mut i = 0;
    while i < N {
        codes[i] = table[i].0;
        i += 1;
    }
    codes
}

/// The description of `code` in `table`.
fn describe<C: PartialEq + Copy>(table: &[(C, &'static str)], code: C) -> Option<&'static str> {
    table.iter().find(|(c, _)| *c == code).map(|(_, d)| *d)
}

/// Types of transaction: `iTipTra` and `dDesTipTra` (D011, D012; XSD `tdDesTiTran`).
pub const TRANSACTION_TYPES: [(u8, &str); 13] = [
    (1, "Venta de mercadería"),
    (2, "Prestación de servicios"),
    (3, "Mixto (Venta de mercadería y servicios)"),
    (4, "Venta de activo fijo"),
    (5, "Venta de divisas"),
    (6, "Compra de divisas"),
    (7, "Promoción o entrega de muestras"),
    (8, "Donación"),
    (9, "Anticipo"),
    (10, "Compra de productos"),
    (11, "Compra de servicios"),
    (SALE_OF_FISCAL_CREDIT, "Venta de crédito fiscal"),
    (MEDICAL_SAMPLES, "Muestras médicas (Art. 3 RG 24/2014)"),
];

/// `iTipTra` 12, a sale of fiscal credit: it carries the resolution's number (`dNumResCF`, H013,
/// rule 2413).
pub const SALE_OF_FISCAL_CREDIT: u8 = 12;

/// `iTipTra` 13, medical samples: the exception to the limit of an unnamed buyer (rule 1321).
pub const MEDICAL_SAMPLES: u8 = 13;

/// `dDesTipTra` of `iTipTra` `code`.
pub fn transaction_type(code: u8) -> Option<&'static str> {
    describe(&TRANSACTION_TYPES, code)
}

/// Presence indicators of an invoice: `iIndPres` and `dDesIndPres` (E011, E012). Code 9 takes a
/// free description of 10 to 30 characters; this is the one kuatia writes.
pub const PRESENCE: [(u8, &str); 7] = [
    (1, "Operación presencial"),
    (2, "Operación electrónica"),
    (3, "Operación telemarketing"),
    (4, "Venta a domicilio"),
    (5, "Operación bancaria"),
    (6, "Operación cíclica"),
    (9, "Otro tipo de operación"),
];

/// The codes of [`PRESENCE`].
pub const PRESENCE_CODES: [u8; 7] = codes_of(&PRESENCE);

/// `dDesIndPres` of `iIndPres` `code`.
pub fn presence(code: u8) -> Option<&'static str> {
    describe(&PRESENCE, code)
}

/// Motives of a credit or debit note: `iMotEmi` and `dDesMotEmi` (E401, E402; XSD `tdDesMotEmi`).
pub const NOTE_REASONS: [(u8, &str); 8] = [
    (1, "Devolución y Ajuste de precios"),
    (2, "Devolución"),
    (3, "Descuento"),
    (4, "Bonificación"),
    (5, "Crédito incobrable"),
    (6, "Recupero de costo"),
    (7, "Recupero de gasto"),
    (8, "Ajuste de precio"),
];

/// The codes of [`NOTE_REASONS`].
pub const NOTE_REASON_CODES: [u8; 8] = codes_of(&NOTE_REASONS);

/// `dDesMotEmi` of `iMotEmi` `code`.
pub fn note_reason(code: u8) -> Option<&'static str> {
    describe(&NOTE_REASONS, code)
}

/// Motives of a remisión: `iMotEmiNR` and `dDesMotEmiNR` (E501, E502; XSD `tiMotivTras`,
/// `tdDMotivTras`). Code 99 takes a free description of 5 to 60 characters; this is the one
/// kuatia writes.
pub const REMISION_REASONS: [(u8, &str); 15] = [
    (1, "Traslado por ventas"),
    (2, "Traslado por consignación"),
    (3, "Exportación"),
    (4, "Traslado por compra"),
    (5, "Importación"),
    (6, "Traslado por devolución"),
    (7, "Traslado entre locales de la empresa"),
    (8, "Traslado de bienes por transformación"),
    (9, "Traslado de bienes para reparación"),
    (10, "Traslado por emisor móvil"),
    (11, "Exhibición o Demostración"),
    (12, "Participación en ferias"),
    (13, "Traslado de encomienda"),
    (14, "Decomiso"),
    (99, "Otro motivo de traslado"),
];

/// The codes of [`REMISION_REASONS`].
pub const REMISION_REASON_CODES: [u8; 15] = codes_of(&REMISION_REASONS);

/// `dDesMotEmiNR` of `iMotEmiNR` `code`.
pub fn remision_reason(code: u8) -> Option<&'static str> {
    describe(&REMISION_REASONS, code)
}

/// Who issues a remisión: `iRespEmiNR` and `dDesRespEmiNR` (E503, E504; XSD `tdDesRespEmiNR`).
pub const REMISION_RESPONSIBLE: [(u8, &str); 5] = [
    (1, "Emisor de la factura"),
    (2, "Poseedor de la factura y bienes"),
    (3, "Empresa transportista"),
    (4, "Despachante de Aduanas"),
    (5, "Agente de transporte o intermediario"),
];

/// `dDesRespEmiNR` of `iRespEmiNR` `code`.
pub fn remision_responsible(code: u8) -> Option<&'static str> {
    describe(&REMISION_RESPONSIBLE, code)
}

/// Card brands: the canonical document's `payment_terms.card.brand`, its `iDenTarj` and
/// `dDesDenTarj` (E621, E622). Code 99 takes a free description of 4 to 20 characters; this is
/// the one kuatia writes.
pub const CARD_BRANDS: [(&str, u8, &str); 7] = [
    ("visa", 1, "Visa"),
    ("mastercard", 2, "Mastercard"),
    ("american_express", 3, "American Express"),
    ("maestro", 4, "Maestro"),
    ("panal", 5, "Panal"),
    ("cabal", 6, "Cabal"),
    ("other", 99, "Otra tarjeta"),
];

/// `iDenTarj` and `dDesDenTarj` of the canonical brand `name`.
pub fn card_brand(name: &str) -> Option<(u8, &'static str)> {
    CARD_BRANDS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, code, description)| (*code, *description))
}

/// The canonical names of [`CARD_BRANDS`], in its order.
pub fn card_brand_names() -> impl Iterator<Item = &'static str> {
    CARD_BRANDS.iter().map(|(name, _, _)| *name)
}

/// Constancias an autofactura refers to: `iTipCons` and `dDesTipCons` (H014, H015).
pub const CONSTANCIA_TYPES: [(u8, &str); 2] = [
    (1, "Constancia de no ser contribuyente"),
    (2, "Constancia de microproductores"),
];

/// `dDesTipCons` of `iTipCons` `code`.
pub fn constancia_type(code: u8) -> Option<&'static str> {
    describe(&CONSTANCIA_TYPES, code)
}

/// Department codes the XSD of departments lists (`cDepEmi` D111 and the other `cDep*`). SET's
/// geographic table, which places cities, has fewer ([`crate::geography`]).
pub const DEPARTMENT_CODES: RangeInclusive<u16> = 1..=20;

/// City codes: up to five digits (`cCiuEmi` D115 and the other `cCiu*`; XSD `tCiudad`).
pub const CITY_CODES: RangeInclusive<u32> = 1..=99_999;

/// The longest city name (`dDesCiuEmi` D116 and the other `dDesCiu*`: 1 to 30 characters).
pub const CITY_NAME_MAX: usize = 30;

/// The unit of measure of a line that names none: 77, "UNI".
pub const DEFAULT_UNIT: u16 = 77;

/// `dDesUniMed` of `cUniMed` `code`.
pub fn unit(code: u16) -> Option<&'static str> {
    UNITS
        .binary_search_by_key(&code, |(c, _)| *c)
        .ok()
        .map(|i| UNITS[i].1)
}

/// SIFEN's name of the country `code` (`dDesPaisRe` of `cPaisRec`, D203, D204).
pub fn country(code: &str) -> Option<&'static str> {
    COUNTRIES
        .binary_search_by(|(c, _)| (*c).cmp(code))
        .ok()
        .map(|i| COUNTRIES[i].1)
}

/// Units of measure: `cUniMed` and `dDesUniMed`, sorted by code (E709, E710, "Tabla 5 – Unidad de
/// Medida"; XSD `Unidades_Medida_v141`).
#[rustfmt::skip]
pub const UNITS: [(u16, &str); 64] = [
    (77, "UNI"), (79, "kg/m2"), (83, "kg"), (86, "g"), (87, "m"), (88, "ML"), (89, "LT"),
    (90, "MG"), (91, "CM"), (92, "CM2"), (93, "CM3"), (94, "PUL"), (95, "MM"), (96, "MM2"),
    (97, "AA"), (98, "ME"), (99, "TN"), (100, "Hs"), (101, "Mi"), (102, "Di"), (103, "Ya"),
    (104, "DET"), (108, "MT"), (109, "M2"), (110, "M3"), (111, "4A"), (112, "Ci"), (113, "DOC"),
    (114, "GLL"), (115, "GRO"), (116, "E4"), (117, "KT"), (118, "M5"), (119, "MCU"),
    (120, "MIL"), (121, "PAR"), (122, "FOT"), (123, "FTK"), (124, "PCE"), (125, "KLT"),
    (126, "RM"), (127, "RO"), (128, "kWh"), (129, "U(JGO)"), (130, "DR"), (131, "BX"),
    (132, "SET"), (133, "PK"), (134, "BG"), (135, "DPC"), (136, "JR"), (137, "BL"), (138, "AB"),
    (139, "BK"), (140, "BW"), (569, "ración"), (625, "Km"), (660, "ml"), (666, "Se"),
    (869, "ha"), (885, "GL"), (891, "pm"), (2329, "UI"), (2366, "CPM"),
];

/// Countries: ISO 3166 alpha-3 code and SIFEN's name, sorted by code (D203, D204, "Tabla 4"; XSD
/// `Paises_v100`, of whose two entries for MKD the first, current one).
#[rustfmt::skip]
pub const COUNTRIES: [(&str, &str); 248] = [
    ("ABW", "Aruba"), ("AFG", "Afganistán"), ("AGO", "Angola"), ("AIA", "Anguila"),
    ("ALA", "Islas Åland"), ("ALB", "Albania"), ("AND", "Andorra"),
    ("ARE", "Emiratos Árabes Unidos"), ("ARG", "Argentina"), ("ARM", "Armenia"),
    ("ASM", "Samoa Americana"), ("ATA", "Antártida"),
    ("ATF", "Territorio de las Tierras Australes Francesas"), ("ATG", "Antigua y Barbuda"),
    ("AUS", "Australia"), ("AUT", "Austria"), ("AZE", "Azerbaiyán"), ("BDI", "Burundi"),
    ("BEL", "Bélgica"), ("BEN", "Benin"), ("BES", "Bonaire, San Eustaquio y Saba"),
    ("BFA", "Burkina Faso"), ("BGD", "Bangladesh"), ("BGR", "Bulgaria"), ("BHR", "Bahrein"),
    ("BHS", "Bahamas"), ("BIH", "Bosnia y Herzegovina"), ("BLM", "San Bartolomé"),
    ("BLR", "Belarús"), ("BLZ", "Belice"), ("BMU", "Bermuda"),
    ("BOL", "Bolivia (Estado Plurinacional de)"), ("BRA", "Brasil"), ("BRB", "Barbados"),
    ("BRN", "Brunei Darussalam"), ("BTN", "Bhután"), ("BWA", "Botswana"),
    ("CAF", "República Centroafricana"), ("CAN", "Canadá"), ("CCK", "Islas Cocos (Keeling)"),
    ("CHE", "Suiza"), ("CHL", "Chile"), ("CHN", "China"), ("CIV", "Côte d'Ivoire"),
    ("CMR", "Camerún"), ("COD", "República Democrática del Congo"), ("COG", "Congo"),
    ("COK", "Islas Cook"), ("COL", "Colombia"), ("COM", "Comoras"), ("CPV", "Cabo Verde"),
    ("CRI", "Costa Rica"), ("CUB", "CUBA"), ("CUW", "Curaçao"), ("CXR", "Isla de Navidad"),
    ("CYM", "Islas Caimán"), ("CYP", "Chipre"), ("CZE", "Chequia"), ("DEU", "Alemania"),
    ("DJI", "Djibouti"), ("DMA", "Dominica"), ("DNK", "Dinamarca"),
    ("DOM", "República Dominicana"), ("DZA", "Argelia"), ("ECU", "Ecuador"), ("EGY", "Egipto"),
    ("ERI", "Eritrea"), ("ESH", "Sáhara Occidental"), ("ESP", "España"), ("EST", "Estonia"),
    ("ETH", "Etiopía"), ("FIN", "Finlandia"), ("FJI", "Fiji"),
    ("FLK", "Islas Malvinas (Falkland)"), ("FRA", "Francia"), ("FRO", "Islas Feroe"),
    ("FSM", "Micronesia (Estados Federados de)"), ("GAB", "Gabón"),
    ("GBR", "Reino Unido de Gran Bretaña e Irlanda del Norte"), ("GEO", "Georgia"),
    ("GGY", "Guernsey"), ("GHA", "Ghana"), ("GIB", "Gibraltar"), ("GIN", "Guinea"),
    ("GLP", "Guadalupe"), ("GMB", "Gambia"), ("GNB", "Guinea-Bissau"),
    ("GNQ", "Guinea Ecuatorial"), ("GRC", "Grecia"), ("GRD", "Granada"), ("GRL", "Groenlandia"),
    ("GTM", "Guatemala"), ("GUF", "Guayana Francesa"), ("GUM", "Guam"), ("GUY", "Guyana"),
    ("HKG", "Hong Kong"), ("HMD", "Islas Heard y McDonald"), ("HND", "Honduras"),
    ("HRV", "Croacia"), ("HTI", "Haití"), ("HUN", "Hungría"), ("IDN", "Indonesia"),
    ("IMN", "Isla de Man"), ("IND", "India"), ("IOT", "Territorio Británico del Océano Índico"),
    ("IRL", "Irlanda"), ("IRN", "Irán (República Islámica del)"), ("IRQ", "Iraq"),
    ("ISL", "Islandia"), ("ISR", "Israel"), ("ITA", "Italia"), ("JAM", "Jamaica"),
    ("JEY", "Jersey"), ("JOR", "Jordania"), ("JPN", "Japón"), ("KAZ", "Kazajstán"),
    ("KEN", "Kenya"), ("KGZ", "Kirguistán"), ("KHM", "Camboya"), ("KIR", "Kiribati"),
    ("KNA", "Saint Kitts y Nevis"), ("KOR", "República de Corea"), ("KWT", "Kuwait"),
    ("LAO", "República Democrática Popular Lao"), ("LBN", "Líbano"), ("LBR", "Liberia"),
    ("LBY", "Libia"), ("LCA", "Santa Lucía"), ("LIE", "Liechtenstein"), ("LKA", "Sri Lanka"),
    ("LSO", "Lesotho"), ("LTU", "Lituania"), ("LUX", "Luxemburgo"), ("LVA", "Letonia"),
    ("MAC", "Macao"), ("MAF", "San Martín (parte francesa)"), ("MAR", "Marruecos"),
    ("MCO", "Mónaco"), ("MDA", "República de Moldova"), ("MDG", "Madagascar"), ("MDV", "Maldivas"),
    ("MEX", "México"), ("MHL", "Islas Marshall"), ("MKD", "Macedonia del Norte"), ("MLI", "Malí"),
    ("MLT", "Malta"), ("MMR", "Myanmar"), ("MNE", "Montenegro"), ("MNG", "Mongolia"),
    ("MNP", "Islas Marianas Septentrionales"), ("MOZ", "Mozambique"), ("MRT", "Mauritania"),
    ("MSR", "Montserrat"), ("MTQ", "Martinica"), ("MUS", "Mauricio"), ("MWI", "Malawi"),
    ("MYS", "Malasia"), ("MYT", "Mayotte"), ("NAM", "Namibia"), ("NCL", "Nueva Caledonia"),
    ("NER", "Níger"), ("NFK", "Islas Norfolk"), ("NGA", "Nigeria"), ("NIC", "Nicaragua"),
    ("NIU", "Niue"), ("NLD", "Países Bajos"), ("NOR", "Noruega"), ("NPL", "Nepal"),
    ("NRU", "Nauru"), ("NZL", "Nueva Zelandia"), ("OMN", "Omán"), ("PAK", "Pakistán"),
    ("PAN", "Panamá"), ("PCN", "Pitcairn"), ("PER", "Perú"), ("PHL", "Filipinas"),
    ("PLW", "Palau"), ("PNG", "Papua Nueva Guinea"), ("POL", "Polonia"), ("PRI", "Puerto Rico"),
    ("PRK", "República Popular Democrática de Corea"), ("PRT", "Portugal"), ("PRY", "Paraguay"),
    ("PSE", "Estado de Palestina"), ("PYF", "Polinesia Francesa"), ("QAT", "Qatar"),
    ("REU", "Reunión"), ("ROU", "Rumania"), ("RUS", "Federación de Rusia"), ("RWA", "Rwanda"),
    ("SAU", "Arabia Saudita"), ("SDN", "Sudán"), ("SEN", "Senegal"), ("SGP", "Singapur"),
    ("SGS", "Georgia del Sur y las Islas Sandwich del Sur"), ("SHN", "Santa Elena"),
    ("SJM", "Islas Svalbard y Jan Mayen"), ("SLB", "Islas Salomón"), ("SLE", "Sierra Leona"),
    ("SLV", "El Salvador"), ("SMR", "San Marino"), ("SOM", "Somalia"),
    ("SPM", "Saint Pierre y Miquelon"), ("SRB", "Serbia"), ("SSD", "Sudán del Sur"),
    ("STP", "Santo Tomé y Príncipe"), ("SUR", "Suriname"), ("SVK", "Eslovaquia"),
    ("SVN", "Eslovenia"), ("SWE", "Suecia"), ("SWZ", "Swazilandia"),
    ("SXM", "San Martín (parte holandés)"), ("SYC", "Seychelles"),
    ("SYR", "República Árabe Siria"), ("TCA", "Islas Turcas y Caicos"), ("TCD", "Chad"),
    ("TGO", "Togo"), ("THA", "Tailandia"), ("TJK", "Tayikistán"), ("TKL", "Tokelau"),
    ("TKM", "Turkmenistán"), ("TLS", "Timor-Leste"), ("TON", "Tonga"),
    ("TTO", "Trinidad y Tabago"), ("TUN", "Túnez"), ("TUR", "Turquía"), ("TUV", "Tuvalu"),
    ("TWN", "Taiwán (Provincia de China)"), ("TZA", "República Unida de Tanzanía"),
    ("UGA", "Uganda"), ("UKR", "Ucrania"), ("UMI", "Islas menores alejadas de Estados Unidos"),
    ("URY", "Uruguay"), ("USA", "Estados Unidos de América"), ("UZB", "Uzbekistán"),
    ("VAT", "Santa Sede"), ("VCT", "San Vicente y las Granadinas"),
    ("VEN", "Venezuela (República Bolivariana de)"), ("VGB", "Islas Vírgenes Británicas"),
    ("VIR", "Islas Vírgenes de los Estados Unidos"), ("VNM", "Viet Nam"), ("VUT", "Vanuatu"),
    ("WLF", "Islas Wallis y Futuna"), ("WSM", "Samoa"), ("YEM", "Yemen"), ("ZAF", "Sudáfrica"),
    ("ZMB", "Zambia"), ("ZWE", "Zimbabwe"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_up_rounds_halves_away_from_zero() {
        let d = |s: &str| s.parse::<Decimal>().expect("decimal");
        for (value, rounded) in [("2.5", "3"), ("-2.5", "-3"), ("2.49", "2"), ("7", "7")] {
            assert_eq!(half_up(d(value)), d(rounded), "{value}");
        }
        assert_eq!(half_up_to(d("0.123456785"), 8), d("0.12345679"));
        assert_eq!(half_up_to(d("-0.123456785"), 8), d("-0.12345679"));
    }

    #[test]
    fn iva_rates_are_0_5_and_10() {
        assert_eq!(iva_rate(Decimal::from(10)), Some(10));
        assert_eq!(iva_rate("5.00".parse().expect("decimal")), Some(5));
        assert_eq!(iva_rate(Decimal::ZERO), Some(0));
        assert_eq!(iva_rate(Decimal::from(7)), None);
    }

    #[test]
    fn lookups_find_each_code_and_nothing_else() {
        assert_eq!(transaction_type(1), Some("Venta de mercadería"));
        assert_eq!(
            transaction_type(MEDICAL_SAMPLES),
            Some("Muestras médicas (Art. 3 RG 24/2014)")
        );
        assert_eq!(transaction_type(0), None);
        assert_eq!(transaction_type(14), None);
        assert_eq!(presence(9), Some("Otro tipo de operación"));
        assert_eq!(presence(7), None);
        assert_eq!(PRESENCE_CODES, [1, 2, 3, 4, 5, 6, 9]);
        assert_eq!(note_reason(8), Some("Ajuste de precio"));
        assert_eq!(note_reason(9), None);
        assert_eq!(NOTE_REASON_CODES, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(remision_reason(14), Some("Decomiso"));
        assert_eq!(remision_reason(99), Some("Otro motivo de traslado"));
        assert_eq!(remision_reason(15), None);
        assert_eq!(
            REMISION_REASON_CODES,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 99]
        );
        assert_eq!(
            remision_responsible(5),
            Some("Agente de transporte o intermediario")
        );
        assert_eq!(remision_responsible(0), None);
        assert_eq!(card_brand("other"), Some((99, "Otra tarjeta")));
        assert_eq!(card_brand("Visa"), None);
        assert_eq!(
            card_brand_names().collect::<Vec<_>>().join(", "),
            "visa, mastercard, american_express, maestro, panal, cabal, other"
        );
        assert_eq!(constancia_type(2), Some("Constancia de microproductores"));
        assert_eq!(constancia_type(3), None);
        assert_eq!(unit(DEFAULT_UNIT), Some("UNI"));
        assert_eq!(unit(2366), Some("CPM"));
        assert_eq!(unit(78), None);
        assert_eq!(country(PARAGUAY), Some("Paraguay"));
        assert_eq!(country("ZWE"), Some("Zimbabwe"));
        assert_eq!(country("ARO"), None);
    }

    #[test]
    fn searched_tables_are_sorted_and_no_table_repeats_a_code() {
        assert!(UNITS.windows(2).all(|w| w[0].0 < w[1].0), "units sorted by code");
        assert!(
            COUNTRIES.windows(2).all(|w| w[0].0 < w[1].0),
            "countries sorted by code"
        );
        for table in [
            &TRANSACTION_TYPES[..],
            &PRESENCE[..],
            &NOTE_REASONS[..],
            &REMISION_REASONS[..],
            &REMISION_RESPONSIBLE[..],
            &CONSTANCIA_TYPES[..],
        ] {
            let mut codes: Vec<u8> = table.iter().map(|(c, _)| *c).collect();
            codes.sort_unstable();
            codes.dedup();
            assert_eq!(codes.len(), table.len(), "{table:?}");
        }
    }
}
