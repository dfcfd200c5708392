//! `kuatia lookup generate`: synthetic registry files shaped like DNIT's, for tests, demos and
//! benchmarks.
//!
//! Ten files `ruc0.txt` … `ruc9.txt` (or `.zip`), split by the RUC's last digit, each sorted by
//! RUC, in the published line format. Persons (88 %) are `APELLIDO APELLIDO, NOMBRE NOMBRE` with
//! RUCs below 80 000 000 (their identity card numbers); companies (12 %) have RUCs from
//! 80 000 000 and names built from activities, places and legal forms. Surnames follow a skewed
//! frequency (GONZALEZ, BENITEZ, MARTINEZ, … are common, as in Paraguay), so searches meet
//! realistically large result sets. Every DV is modulo 11 (`kuatia_domain::check_digit`).
//!
//! The state mix is an assumption (DNIT publishes no statistics, only the values):
//! ACTIVO 64 %, CANCELADO 18 %, SUSPENSION TEMPORAL 14 %, BLOQUEADO 2.5 %,
//! CANCELADO DEFINITIVO 1.5 %.
//!
//! On request it injects the quirks an importer must survive, in exact numbers so that tests can
//! check the import's counts: names containing `|`, lines in Latin-1, blank lines and broken
//! lines. Output is reproducible for a given seed.

use kuatia_domain::lookup::line::{RegistryRow, format_line};
use kuatia_domain::ruc::Ruc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Taxpayers.
    pub rows: usize,
    /// Seed of the random choices.
    pub seed: u64,
    /// Write `rucN.zip` (each holding `rucN.txt`) instead of `rucN.txt`.
    pub zip: bool,
    /// Names containing `|` (rows, counted in `rows`).
    pub pipes: usize,
    /// Rows written in Latin-1 (counted in `rows`).
    pub latin1: usize,
    /// Extra blank lines.
    pub blank: usize,
    /// Extra broken lines.
    pub broken: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            rows: 1000,
            seed: 42,
            zip: false,
            pipes: 0,
            latin1: 0,
            blank: 0,
            broken: 0,
        }
    }
}

/// What was generated.
#[derive(Debug, Clone, Default)]
pub struct GenerateSummary {
    /// The files written, with their number of rows.
    pub files: Vec<(PathBuf, usize)>,
    /// Taxpayers written.
    pub rows: usize,
    /// Of which persons.
    pub persons: usize,
    /// Rows per state.
    pub states: Vec<(&'static str, usize)>,
    /// Names containing `|`.
    pub pipes: usize,
    /// Rows written in Latin-1.
    pub latin1: usize,
    /// Blank lines added.
    pub blank: usize,
    /// Broken lines added.
    pub broken: usize,
}

/// Surnames, most frequent first (weights fall as 1/(rank+8): GONZALEZ is about 4 % of draws,
/// the first ten about 25 %, as in Paraguay, with a long tail).
const SURNAMES: &[&str] = &[
    "GONZALEZ",
    "BENITEZ",
    "MARTINEZ",
    "LOPEZ",
    "GIMENEZ",
    "VERA",
    "DUARTE",
    "RAMIREZ",
    "FERNANDEZ",
    "ROJAS",
    "ACOSTA",
    "BAEZ",
    "CABALLERO",
    "GOMEZ",
    "ORTIZ",
    "VILLALBA",
    "RODRIGUEZ",
    "CACERES",
    "AYALA",
    "FRANCO",
    "ROMERO",
    "SANCHEZ",
    "MENDEZ",
    "ESPINOLA",
    "RIVEROS",
    "CARDOZO",
    "AQUINO",
    "CABRERA",
    "ALVAREZ",
    "GARCIA",
    "TORRES",
    "NUÑEZ",
    "MEZA",
    "CENTURION",
    "PAREDES",
    "AMARILLA",
    "ARCE",
    "SOSA",
    "FLEITAS",
    "ALMADA",
    "OVIEDO",
    "RECALDE",
    "CANTERO",
    "SILVA",
    "MORINIGO",
    "ZARATE",
    "ESCOBAR",
    "FERREIRA",
    "INSFRAN",
    "BRITEZ",
    "OZUNA",
    "CAÑETE",
    "LEZCANO",
    "OJEDA",
    "SERVIN",
    "FIGUEREDO",
    "SALINAS",
    "VELAZQUEZ",
    "DOMINGUEZ",
    "CORONEL",
    "DELGADO",
    "BOGADO",
    "AGÜERO",
    "ARANDA",
    "ESTIGARRIBIA",
    "GALEANO",
    "IBAÑEZ",
    "JARA",
    "LEGUIZAMON",
    "MAIDANA",
    "MIRANDA",
    "MOREL",
    "NOGUERA",
    "OCAMPOS",
    "PERALTA",
    "PEREIRA",
    "PORTILLO",
    "QUIÑONEZ",
    "RIQUELME",
    "SAMANIEGO",
    "TALAVERA",
    "VALDEZ",
    "VAZQUEZ",
    "YEGROS",
    "ZAYAS",
    "ALONSO",
    "BARRIOS",
    "BOBADILLA",
    "CHAVEZ",
    "DIAZ",
    "ENCISO",
    "FRETES",
    "GAONA",
    "GAUTO",
    "GODOY",
    "IRALA",
    "LUGO",
    "MEDINA",
    "MELGAREJO",
    "MOLINAS",
    "MONTIEL",
    "MUÑOZ",
    "NAVARRO",
    "OLMEDO",
    "PAIVA",
    "PEÑA",
    "RIOS",
    "RUIZ DIAZ",
    "SAUCEDO",
    "SEGOVIA",
    "TROCHE",
    "VARGAS",
    "VILLAGRA",
    "ZORRILLA",
    "ARGUELLO",
    "AVALOS",
    "BRIZUELA",
    "CUBILLA",
    "ECHEVERRIA",
    "GAMARRA",
    "ACUÑA",
    "ADORNO",
    "AGUILERA",
    "ALCARAZ",
    "ALDERETE",
    "ALEGRE",
    "ALFONSO",
    "ARAUJO",
    "ARMOA",
    "ARRUA",
    "ASTIGARRAGA",
    "AVEIRO",
    "BAREIRO",
    "BARRETO",
    "BARRIENTOS",
    "BATTILANA",
    "BENEGAS",
    "BERNAL",
    "BOGARIN",
    "BORDON",
    "BORJA",
    "BURGOS",
    "CABAÑAS",
    "CAMPOS",
    "CANDIA",
    "CARDOSO",
    "CARRERA",
    "CARRILLO",
    "CASCO",
    "CASTILLO",
    "CASTRO",
    "CHAMORRO",
    "COLMAN",
    "CORREA",
    "CRISTALDO",
    "CUEVAS",
    "DAVALOS",
    "DELVALLE",
    "ELIZECHE",
    "ESPINOZA",
    "ESQUIVEL",
    "ESTECHE",
    "FALCON",
    "FARIÑA",
    "FERNANDES",
    "FIGUEROA",
    "FLORES",
    "FRUTOS",
    "FUSTER",
    "GARAY",
    "GAVILAN",
    "GOIBURU",
    "GONZALES",
    "GRANADA",
    "GUERRERO",
    "GUILLEN",
    "GUTIERREZ",
    "HERMOSILLA",
    "HERRERA",
    "IBARRA",
    "IRRAZABAL",
    "ISASI",
    "ITURBE",
    "JACQUET",
    "JIMENEZ",
    "LEDESMA",
    "LEON",
    "LIMA",
    "LOVERA",
    "MACIEL",
    "MANCUELLO",
    "MARECOS",
    "MARIN",
    "MARQUEZ",
    "MASI",
    "MATTO",
    "MAZACOTTE",
    "MENDOZA",
    "MERELES",
    "MOLINA",
    "MONGES",
    "MONTANIA",
    "MORA",
    "MORALES",
    "MORENO",
    "NAVARRETE",
    "NUÑES",
    "OLIVEIRA",
    "OSORIO",
    "OTAZU",
    "PACHECO",
    "PALACIOS",
    "PANIAGUA",
    "PASTORE",
    "PEDROZO",
    "PEREZ",
    "PINTO",
    "PRIETO",
    "QUINTANA",
    "RAMOS",
    "REYES",
    "ROA",
    "ROLON",
    "ROMAN",
    "RUIZ",
    "SALDIVAR",
    "SALCEDO",
    "SANABRIA",
    "SANTACRUZ",
    "SANTOS",
    "SARACHO",
    "SEGUI",
    "SOLIS",
    "SOTO",
    "SUAREZ",
    "TOLEDO",
    "TRINIDAD",
    "URBIETA",
    "URUNAGA",
    "VALDOVINOS",
    "VALIENTE",
    "VALLEJOS",
    "VEGA",
    "VELAZCO",
    "VERGARA",
    "VIDAL",
    "VILLAMAYOR",
    "VILLASANTI",
    "VIVEROS",
    "YNSFRAN",
    "YUBERO",
    "ZACARIAS",
    "ZALAZAR",
    "ZARZA",
    "KRAUSE",
    "SCHMIDT",
    "WIEBE",
    "FRIESEN",
    "GIESBRECHT",
    "DYCK",
    "PENNER",
    "KLASSEN",
    "NEUFELD",
    "HARDER",
    "THIESSEN",
    "FEHR",
    "KIM",
    "LEE",
    "PARK",
    "CHOI",
    "NAKAYAMA",
    "TAKAHASHI",
    "YAMADA",
    "SATO",
    "DA SILVA",
    "DOS SANTOS",
    "DE SOUZA",
    "DE OLIVEIRA",
    "COSTA",
    "RIBEIRO",
    "ALMEIDA",
    "CARVALHO",
    "HAMMOUD",
    "ZAYAT",
    "SALEH",
    "YUNIS",
    "ABDALA",
    "KAWAS",
    "WASMOSY",
    "ZUCCOLILLO",
    "RIERA",
    "BOETTNER",
    "STROESSNER",
    "HEISECKE",
    "SCAVONE",
    "FILARTIGA",
    "CHAVES",
    "SAGUIER",
];

/// Men's names, most frequent first.
const MALE: &[&str] = &[
    "JUAN",
    "JOSE",
    "CARLOS",
    "LUIS",
    "MIGUEL",
    "JORGE",
    "RAMON",
    "PEDRO",
    "DERLIS",
    "OSVALDO",
    "GUSTAVO",
    "FERNANDO",
    "VICTOR",
    "HUGO",
    "MARCOS",
    "CRISTIAN",
    "RODRIGO",
    "DIEGO",
    "ANIBAL",
    "NESTOR",
    "ROQUE",
    "BLAS",
    "FRANCISCO",
    "ANTONIO",
    "RUBEN",
    "CESAR",
    "ALCIDES",
    "FELIPE",
    "EDGAR",
    "ARNALDO",
    "JULIO",
    "ENRIQUE",
    "ALFREDO",
    "SERGIO",
    "RICARDO",
    "FABIO",
    "HERNAN",
    "MATIAS",
    "SEBASTIAN",
    "NICOLAS",
    "ALEJANDRO",
    "DANIEL",
    "DAVID",
    "PABLO",
    "RAUL",
    "TOMAS",
    "ALBERTO",
    "ANGEL",
    "ARIEL",
    "AUGUSTO",
    "BERNARDO",
    "BRUNO",
    "CELSO",
    "CLAUDIO",
    "CRISTOBAL",
    "DAMIAN",
    "DARIO",
    "EDUARDO",
    "ELIAS",
    "EMILIO",
    "ESTEBAN",
    "EUSEBIO",
    "FEDERICO",
    "FELIX",
    "FIDEL",
    "GABRIEL",
    "GERARDO",
    "GILBERTO",
    "GREGORIO",
    "GUILLERMO",
    "HECTOR",
    "HORACIO",
    "IGNACIO",
    "ISIDRO",
    "IVAN",
    "JAVIER",
    "JESUS",
    "JOAQUIN",
    "LEONARDO",
    "LORENZO",
    "LUCAS",
    "MANUEL",
    "MARCELO",
    "MARIO",
    "MARTIN",
    "MAURICIO",
    "NELSON",
    "NORBERTO",
    "OSCAR",
    "PATRICIO",
    "RAFAEL",
    "REINALDO",
    "ROBERTO",
    "RODOLFO",
    "ROGELIO",
    "SALVADOR",
    "SANTIAGO",
    "SILVIO",
    "TEODORO",
    "ULISES",
    "VICENTE",
    "WALTER",
    "WILSON",
    "ZACARIAS",
    "ADOLFO",
    "AGUSTIN",
    "AMADO",
    "APOLINAR",
    "ARSENIO",
    "BASILIO",
    "BENIGNO",
    "CATALINO",
    "CEFERINO",
    "CIRILO",
    "CRESCENCIO",
    "DIONISIO",
    "EFRAIN",
    "ELADIO",
    "EPIFANIO",
    "ESTANISLAO",
    "FLORENCIO",
    "FULGENCIO",
    "HILARIO",
    "HIPOLITO",
    "INOCENCIO",
    "JUSTO",
    "LEONCIO",
    "MAXIMO",
    "NICANOR",
    "PANTALEON",
    "PRUDENCIO",
];

/// Women's names, most frequent first.
const FEMALE: &[&str] = &[
    "MARIA",
    "ANA",
    "ROSA",
    "CARMEN",
    "LILIAN",
    "FATIMA",
    "NILDA",
    "MIRTHA",
    "GLADYS",
    "LIZ",
    "LORENA",
    "PATRICIA",
    "SANDRA",
    "GRACIELA",
    "LUCIA",
    "ELENA",
    "NATALIA",
    "SONIA",
    "ZULMA",
    "BLANCA",
    "CYNTHIA",
    "ROCIO",
    "BELEN",
    "CELESTE",
    "DAHIANA",
    "ESTELA",
    "FELICIA",
    "GISELLE",
    "ISABEL",
    "JULIANA",
    "KARINA",
    "LETICIA",
    "MONICA",
    "NORMA",
    "OLGA",
    "PERLA",
    "RAQUEL",
    "SOFIA",
    "TERESA",
    "VALERIA",
    "VIVIANA",
    "YOLANDA",
    "ANTONIA",
    "ASUNCION",
    "CONCEPCION",
    "ADRIANA",
    "ALICIA",
    "ANDREA",
    "ANGELA",
    "BEATRIZ",
    "CAROLINA",
    "CECILIA",
    "CLARA",
    "CRISTINA",
    "DELIA",
    "DIANA",
    "DORA",
    "EDITH",
    "ELIZABETH",
    "ELSA",
    "EMILIA",
    "ESTHER",
    "EVA",
    "FABIOLA",
    "FLORENCIA",
    "GABRIELA",
    "GLORIA",
    "GUADALUPE",
    "HILDA",
    "INES",
    "IRMA",
    "JACQUELINE",
    "JUANA",
    "JULIA",
    "LAURA",
    "LIDIA",
    "LILIANA",
    "LOURDES",
    "LUISA",
    "MABEL",
    "MAGDALENA",
    "MARCELA",
    "MARGARITA",
    "MARTA",
    "MERCEDES",
    "MIRIAM",
    "NANCY",
    "NOELIA",
    "PAOLA",
    "PILAR",
    "RAMONA",
    "REBECA",
    "RUTH",
    "SARA",
    "SILVIA",
    "SUSANA",
    "TANIA",
    "VANESA",
    "VERONICA",
    "VICTORIA",
    "VIRGINIA",
    "YESSICA",
    "ZUNILDA",
    "AIDA",
    "ARMINDA",
    "BASILIA",
    "BENITA",
    "CANDIDA",
    "CELIA",
    "CIPRIANA",
    "CLOTILDE",
    "DIONISIA",
    "DOMINGA",
    "EDUVIGIS",
    "ELVIRA",
    "EPIFANIA",
    "ESPERANZA",
    "EUSEBIA",
    "FAUSTINA",
    "FERMINA",
    "FIDELINA",
    "GENARA",
    "HERMINIA",
    "HORTENSIA",
    "JUSTINA",
];

/// Syllables of made-up brand words (Guaraní and Spanish sounds), so that companies bring the long
/// tail of distinct words a real registry has.
const SYLLABLES: &[&str] = &[
    "KA", "RA", "PO", "TA", "GUA", "YVY", "MBA", "PY", "TE", "KO", "NA", "RE", "SA", "VI", "JA", "HO", "MI",
    "LU", "TI", "NE", "ÑE", "PA", "CU", "RU", "YA", "TO", "PE", "SO", "MO", "LA", "VE", "DI",
];

const ACTIVITIES: &[&str] = &[
    "COMERCIAL",
    "DISTRIBUIDORA",
    "CONSTRUCTORA",
    "FARMACIA",
    "INVERSIONES",
    "TRANSPORTADORA",
    "IMPORTADORA",
    "SERVICIOS",
    "INDUSTRIAS",
    "AGROGANADERA",
    "ESTANCIA",
    "FERRETERIA",
    "AUTOMOTORES",
    "INMOBILIARIA",
    "CONSULTORA",
    "LABORATORIO",
    "SUPERMERCADO",
    "PANADERIA",
    "TECNOLOGIA",
    "AGRICOLA",
    "CEREALERA",
    "MADERERA",
    "TEXTIL",
    "FRIGORIFICO",
    "CLINICA",
    "EDITORIAL",
    "GRAFICA",
    "SEGURIDAD",
    "LOGISTICA",
    "EXPORTADORA",
];

const PLACES: &[&str] = &[
    "DEL ESTE",
    "PARANA",
    "ITAPUA",
    "GUARANI",
    "SAN LORENZO",
    "CONCEPCION",
    "CORDILLERA",
    "GUAIRA",
    "CAAGUAZU",
    "ALTO PARANA",
    "MISIONES",
    "CHACO",
    "ÑEEMBUCU",
    "AMAMBAY",
    "CANINDEYU",
    "PRESIDENTE HAYES",
    "BOQUERON",
    "CAAZAPA",
    "PARAGUARI",
    "ASUNCION",
    "LUQUE",
    "CAPIATA",
    "LAMBARE",
    "FERNANDO DE LA MORA",
    "MARIANO ROQUE ALONSO",
    "ÑEMBY",
    "ITAUGUA",
    "AREGUA",
    "YPACARAI",
    "SAN BERNARDINO",
    "ENCARNACION",
    "CIUDAD DEL ESTE",
    "PILAR",
    "VILLARRICA",
    "CORONEL OVIEDO",
    "HORQUETA",
    "MBARETE",
    "PORÃ",
    "YVY MARANE'Y",
    "ARASA",
    "TAJY",
    "YBYRAPYTA",
    "SANTA RITA",
    "SAN JORGE",
    "SANTA CLARA",
    "LA PAZ",
    "EL SOL",
    "LA ESPERANZA",
    "DON BOSCO",
];

const FORMS: &[&str] = &[
    "S.A.",
    "S.R.L.",
    "E.A.S.",
    "S.A.E.C.A.",
    "SOCIEDAD ANONIMA",
    "SRL",
    "SA",
    "S.A.C.I.",
];

const STATES: [(&str, u32); 5] = [
    ("ACTIVO", 640),
    ("CANCELADO", 180),
    ("SUSPENSION TEMPORAL", 140),
    ("BLOQUEADO", 25),
    ("CANCELADO DEFINITIVO", 15),
];

/// Picks from `items` with the weights of [`cumulative`].
fn skewed<'a>(rng: &mut StdRng, items: &[&'a str], cumulative: &[f64]) -> &'a str {
    let total = cumulative.last().copied().unwrap_or(1.0);
    let x = rng.random::<f64>() * total;
    let i = cumulative.partition_point(|&c| c < x).min(items.len() - 1);
    items[i]
}

fn cumulative(len: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(len);
    let mut total = 0.0;
    for rank in 0..len {
        total += 1.0 / (rank as f64 + 8.0);
        out.push(total);
    }
    out
}

fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

fn state(rng: &mut StdRng) -> &'static str {
    let total: u32 = STATES.iter().map(|(_, w)| w).sum();
    let mut x = rng.random_range(0..total);
    for (s, w) in STATES {
        if x < w {
            return s;
        }
        x -= w;
    }
    "ACTIVO"
}

/// The first `n` letters of the search form of `word` (for legacy codes).
fn initials(word: &str, n: usize) -> String {
    kuatia_domain::lookup::normalize::normalize(word)
        .chars()
        .filter(char::is_ascii_alphabetic)
        .chain(std::iter::repeat('X'))
        .take(n)
        .collect()
}

/// Distinct numbers `base + (i·a + c) mod m` for `i < count` (a permutation of `0..m`: `a` is
/// odd and `m` a power of two, and `m ≥ count`).
fn spread(count: usize, base: u64, at_least: u64, rng: &mut StdRng) -> Vec<u64> {
    let m = at_least.max(count as u64).max(16).next_power_of_two();
    let a = (rng.random_range(m / 4..m / 2) | 1) % m;
    let c = rng.random_range(0..m);
    (0..count as u64)
        .map(|i| base + (i.wrapping_mul(a).wrapping_add(c) % m))
        .collect()
}

/// A made-up word of 2 to 4 syllables.
fn brand(rng: &mut StdRng) -> String {
    (0..rng.random_range(2..=4))
        .map(|_| pick(rng, SYLLABLES))
        .collect()
}

fn person(rng: &mut StdRng, surnames: &[f64], given: &(Vec<f64>, Vec<f64>)) -> String {
    let s1 = skewed(rng, SURNAMES, surnames);
    let mut name = s1.to_owned();
    if rng.random_bool(0.85) {
        name.push(' ');
        name.push_str(skewed(rng, SURNAMES, surnames));
    }
    name.push_str(", ");
    let (firsts, weights) = if rng.random_bool(0.5) {
        (MALE, &given.0)
    } else {
        (FEMALE, &given.1)
    };
    name.push_str(skewed(rng, firsts, weights));
    if rng.random_bool(0.7) {
        name.push(' ');
        name.push_str(skewed(rng, firsts, weights));
    }
    name
}

fn company(rng: &mut StdRng, surnames: &[f64]) -> String {
    let form = pick(rng, FORMS);
    match rng.random_range(0..8) {
        0 => format!("{} {} {form}", pick(rng, ACTIVITIES), pick(rng, PLACES)),
        6 => format!("{} {form}", brand(rng)),
        7 => format!("{} {} {form}", pick(rng, ACTIVITIES), brand(rng)),
        1 => format!("{} HERMANOS {form}", skewed(rng, SURNAMES, surnames)),
        2 => format!(
            "{} Y {} {form}",
            skewed(rng, SURNAMES, surnames),
            skewed(rng, SURNAMES, surnames)
        ),
        3 => format!(
            "{} {} {form}",
            pick(rng, ACTIVITIES),
            skewed(rng, SURNAMES, surnames)
        ),
        4 => format!("COOPERATIVA {} {} LTDA", pick(rng, ACTIVITIES), pick(rng, PLACES)),
        _ => format!("{} {form}", pick(rng, PLACES)),
    }
}

fn broken_line(rng: &mut StdRng, k: usize) -> String {
    let n = rng.random_range(1_000_000..9_999_999u32);
    match k % 5 {
        0 => format!("{n}|TRUNCADO, LINEA|"),
        1 => format!("X{n}|RUC CON LETRA, MAL|1||ACTIVO|"),
        2 => format!("{n}|DIGITO VERIFICADOR, MAL|12||ACTIVO|"),
        3 => format!("{n}| |1||ACTIVO|"),
        _ => format!("{n}|SIN ESTADO, LINEA|1|||"),
    }
}

/// Writes the files into `out` (created if missing).
pub fn generate(out: &Path, options: &GenerateOptions) -> std::io::Result<GenerateSummary> {
    std::fs::create_dir_all(out)?;
    let mut rng = StdRng::seed_from_u64(options.seed);
    let surnames = cumulative(SURNAMES.len());
    let given = (cumulative(MALE.len()), cumulative(FEMALE.len()));
    let persons = options.rows * 88 / 100;
    let companies = options.rows - persons;
    let mut numbers = spread(persons, 400_000, persons as u64 * 3, &mut rng);
    numbers.extend(spread(companies, 80_000_000, companies as u64 * 2, &mut rng));

    let mut summary = GenerateSummary {
        rows: options.rows,
        persons,
        ..GenerateSummary::default()
    };
    let mut state_counts = [0usize; STATES.len()];
    // (RUC, line bytes), per file by last digit.
    let mut files: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 10];
    let pipes: Vec<usize> = choose(&mut rng, options.rows, options.pipes.min(options.rows), None);
    let latin1: Vec<usize> = choose(
        &mut rng,
        options.rows,
        options.latin1.min(options.rows),
        Some(&pipes),
    );
    for (i, &number) in numbers.iter().enumerate() {
        let is_person = i < persons;
        let mut name = if is_person {
            person(&mut rng, &surnames, &given)
        } else {
            company(&mut rng, &surnames)
        };
        if pipes.binary_search(&i).is_ok() {
            name = if is_person {
                format!("{name} | SUCESION")
            } else {
                format!(
                    "{} | SUCURSAL {} {}",
                    pick(&mut rng, ACTIVITIES),
                    rng.random_range(1..9),
                    pick(&mut rng, FORMS)
                )
            };
            summary.pipes += 1;
        }
        let is_latin1 = latin1.binary_search(&i).is_ok();
        if is_latin1 {
            name = format!(
                "CAÑETE NUÑEZ, {}",
                pick(&mut rng, &["JOSÉ", "MARÍA", "ÁNGEL", "INÉS", "ANDRÉS"])
            );
            summary.latin1 += 1;
        }
        let ruc = Ruc::from_number(&number.to_string())
            .map_err(|e| std::io::Error::other(format!("generated RUC {number}: {e}")))?;
        let st = state(&mut rng);
        if let Some(k) = STATES.iter().position(|(s, _)| *s == st) {
            state_counts[k] += 1;
        }
        let old_ruc = if is_person && rng.random_bool(0.7) {
            let parts: Vec<&str> = name.split(", ").collect();
            format!(
                "{}{}{:02}{:02}{:02}{}",
                initials(parts[0], 2),
                initials(parts.get(1).unwrap_or(&"X"), 2),
                rng.random_range(40..99),
                rng.random_range(1..13),
                rng.random_range(1..29),
                char::from(b'A' + rng.random_range(0..26u8))
            )
        } else if !is_person && rng.random_bool(0.4) {
            format!(
                "{}{:06}{}",
                initials(&name, 4),
                rng.random_range(0..1_000_000),
                char::from(b'A' + rng.random_range(0..26u8))
            )
        } else {
            String::new()
        };
        let row = RegistryRow {
            ruc: ruc.number().to_owned(),
            name,
            dv: ruc.check_digit(),
            old_ruc,
            state: st.to_owned(),
        };
        let line = format_line(&row);
        let bytes = if is_latin1 {
            line.chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                .collect()
        } else {
            line.into_bytes()
        };
        files[(number % 10) as usize].push((number, bytes));
    }
    summary.states = STATES
        .iter()
        .zip(state_counts)
        .map(|((s, _), n)| (*s, n))
        .collect();
    for file in &mut files {
        file.sort_unstable_by_key(|(n, _)| *n);
    }
    // Extra lines at random places (RUC 0 keeps them where they fall after sorting).
    for k in 0..options.blank + options.broken {
        let file = &mut files[rng.random_range(0..10)];
        let at = rng.random_range(0..=file.len());
        let line = if k < options.blank {
            Vec::new()
        } else {
            broken_line(&mut rng, k - options.blank).into_bytes()
        };
        file.insert(at, (0, line));
    }
    summary.blank = options.blank;
    summary.broken = options.broken;

    for (digit, lines) in files.iter().enumerate() {
        let rows = lines.iter().filter(|(n, _)| *n != 0).count();
        let txt_name = format!("ruc{digit}.txt");
        let mut body = Vec::with_capacity(lines.iter().map(|(_, l)| l.len() + 1).sum());
        for (_, line) in lines {
            body.extend_from_slice(line);
            body.push(b'\n');
        }
        let path = if options.zip {
            let path = out.join(format!("ruc{digit}.zip"));
            let file = std::fs::File::create(&path)?;
            let mut zip = zip::ZipWriter::new(file);
            zip.start_file(
                txt_name,
                zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated),
            )
            .map_err(std::io::Error::other)?;
            zip.write_all(&body)?;
            zip.finish().map_err(std::io::Error::other)?;
            path
        } else {
            let path = out.join(txt_name);
            std::fs::write(&path, &body)?;
            path
        };
        summary.files.push((path, rows));
    }
    Ok(summary)
}

/// `count` distinct indexes below `n`, sorted, avoiding those in `avoid`.
fn choose(rng: &mut StdRng, n: usize, count: usize, avoid: Option<&[usize]>) -> Vec<usize> {
    let mut chosen = std::collections::BTreeSet::new();
    let free = n - avoid.map_or(0, <[usize]>::len);
    let count = count.min(free);
    while chosen.len() < count {
        let i = rng.random_range(0..n);
        if avoid.is_some_and(|a| a.binary_search(&i).is_ok()) {
            continue;
        }
        chosen.insert(i);
    }
    chosen.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuatia_domain::lookup::line::{Encoding, Line, parse_line};

    #[test]
    fn generated_lines_parse_with_correct_check_digits_and_the_quirks_asked_for() {
        let dir = std::env::temp_dir().join(format!("kuatia-gen-{}", uuid::Uuid::now_v7().simple()));
        let options = GenerateOptions {
            rows: 2000,
            seed: 7,
            pipes: 5,
            latin1: 4,
            blank: 3,
            broken: 6,
            ..GenerateOptions::default()
        };
        let summary = generate(&dir, &options).expect("generate");
        let (mut rows, mut blank, mut broken, mut latin1, mut pipes) = (0, 0, 0, 0, 0);
        let mut seen = std::collections::HashSet::new();
        for (path, _) in &summary.files {
            let digit = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.strip_prefix("ruc"))
                .expect("name");
            let bytes = std::fs::read(path).expect("read");
            for line in bytes.strip_suffix(b"\n").unwrap_or(&bytes).split(|&b| b == b'\n') {
                match parse_line(line) {
                    Line::Blank => blank += 1,
                    Line::Broken(..) => broken += 1,
                    Line::Row(row, encoding) => {
                        rows += 1;
                        assert!(!row.dv_differs_from_modulo11(), "{row:?}");
                        assert!(row.ruc.ends_with(digit), "{} in ruc{digit}.txt", row.ruc);
                        assert!(seen.insert(row.ruc.clone()), "RUC {} twice", row.ruc);
                        latin1 += usize::from(encoding == Encoding::Latin1);
                        pipes += usize::from(row.name.contains('|'));
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((rows, blank, broken, latin1, pipes), (2000, 3, 6, 4, 5));
        assert_eq!(summary.states.iter().map(|(_, n)| n).sum::<usize>(), 2000);
    }
}
