"""The vocabulary of capeval's PTB tokenizer (:mod:`capeval.text.ptb`): the character tables measured on
pycocoevalcap's ``stanford-corenlp-3.4.1.jar`` and the regular-expression pieces its token classes are built from
(letters, digits, apostrophes, clitics, words, acronyms, addresses, compounds), with the jar's abbreviation lists.
Provenance: see :mod:`capeval.text.ptb` (our own expressions, checked against the jar; the tables are measured facts
about its behaviour)."""

from __future__ import annotations

import re

# ---------------------------------------------------------------------------------------------------------------
# Character tables measured on the jar: hexadecimal code points and ranges of the Basic Multilingual Plane (the jar
# reads UTF-16 units: each half of a surrogate pair is a character it cannot tokenize, i.e. drops)
# ---------------------------------------------------------------------------------------------------------------
_UNICODE_LETTERS = (  # letters of the jar's Unicode tables
    "41-5A 61-7A AA B5 BA C0-D6 D8-F6 F8-2C1 2C6-2D1 2E0-2E4 2EC 2EE 370-374 376-377 37A-37D 386 388-38A 38C "
    "38E-3A1 3A3-3F5 3F7-481 48A-527 531-556 559 561-587 5D0-5EA 5F0-5F2 620-64A 66E-66F 671-6D3 6D5 6E5-6E6 "
    "6EE-6EF 6FA-6FC 6FF 710 712-72F 74D-7A5 7B1 7CA-7EA 7F4-7F5 7FA 800-815 81A 824 828 840-858 8A0 8A2-8AC "
    "904-939 93D 950 958-961 971-977 979-97F 985-98C 98F-990 993-9A8 9AA-9B0 9B2 9B6-9B9 9BD 9CE 9DC-9DD 9DF-9E1 "
    "9F0-9F1 A05-A0A A0F-A10 A13-A28 A2A-A30 A32-A33 A35-A36 A38-A39 A59-A5C A5E A72-A74 A85-A8D A8F-A91 "
    "A93-AA8 AAA-AB0 AB2-AB3 AB5-AB9 ABD AD0 AE0-AE1 B05-B0C B0F-B10 B13-B28 B2A-B30 B32-B33 B35-B39 B3D "
    "B5C-B5D B5F-B61 B71 B83 B85-B8A B8E-B90 B92-B95 B99-B9A B9C B9E-B9F BA3-BA4 BA8-BAA BAE-BB9 BD0 C05-C0C "
    "C0E-C10 C12-C28 C2A-C33 C35-C39 C3D C58-C59 C60-C61 C85-C8C C8E-C90 C92-CA8 CAA-CB3 CB5-CB9 CBD CDE CE0-CE1 "
    "CF1-CF2 D05-D0C D0E-D10 D12-D3A D3D D4E D60-D61 D7A-D7F D85-D96 D9A-DB1 DB3-DBB DBD DC0-DC6 E01-E30 "
    "E32-E33 E40-E46 E81-E82 E84 E87-E88 E8A E8D E94-E97 E99-E9F EA1-EA3 EA5 EA7 EAA-EAB EAD-EB0 EB2-EB3 EBD "
    "EC0-EC4 EC6 EDC-EDF F00 F40-F47 F49-F6C F88-F8C 1000-102A 103F 1050-1055 105A-105D 1061 1065-1066 "
    "106E-1070 1075-1081 108E 10A0-10C5 10C7 10CD 10D0-10FA 10FC-1248 124A-124D 1250-1256 1258 125A-125D "
    "1260-1288 128A-128D 1290-12B0 12B2-12B5 12B8-12BE 12C0 12C2-12C5 12C8-12D6 12D8-1310 1312-1315 1318-135A "
    "1380-138F 13A0-13F4 1401-166C 166F-167F 1681-169A 16A0-16EA 1700-170C 170E-1711 1720-1731 1740-1751 "
    "1760-176C 176E-1770 1780-17B3 17D7 17DC 1820-1877 1880-18A8 18AA 18B0-18F5 1900-191C 1950-196D 1970-1974 "
    "1980-19AB 19C1-19C7 1A00-1A16 1A20-1A54 1AA7 1B05-1B33 1B45-1B4B 1B83-1BA0 1BAE-1BAF 1BBA-1BE5 1C00-1C23 "
    "1C4D-1C4F 1C5A-1C7D 1CE9-1CEC 1CEE-1CF1 1CF5-1CF6 1D00-1DBF 1E00-1F15 1F18-1F1D 1F20-1F45 1F48-1F4D "
    "1F50-1F57 1F59 1F5B 1F5D 1F5F-1F7D 1F80-1FB4 1FB6-1FBC 1FBE 1FC2-1FC4 1FC6-1FCC 1FD0-1FD3 1FD6-1FDB "
    "1FE0-1FEC 1FF2-1FF4 1FF6-1FFC 2071 207F 2090-209C 2102 2107 210A-2113 2115 2119-211D 2124 2126 2128 "
    "212A-212D 212F-2139 213C-213F 2145-2149 214E 2183-2184 2C00-2C2E 2C30-2C5E 2C60-2CE4 2CEB-2CEE 2CF2-2CF3 "
    "2D00-2D25 2D27 2D2D 2D30-2D67 2D6F 2D80-2D96 2DA0-2DA6 2DA8-2DAE 2DB0-2DB6 2DB8-2DBE 2DC0-2DC6 2DC8-2DCE "
    "2DD0-2DD6 2DD8-2DDE 2E2F 3005-3006 3031-3035 303B-303C 3041-3096 309D-309F 30A1-30FA 30FC-30FF 3105-312D "
    "3131-318E 31A0-31BA 31F0-31FF 3400-4DB5 4E00-9FCC A000-A48C A4D0-A4FD A500-A60C A610-A61F A62A-A62B "
    "A640-A66E A67F-A697 A6A0-A6E5 A717-A71F A722-A788 A78B-A78E A790-A793 A7A0-A7AA A7F8-A801 A803-A805 "
    "A807-A80A A80C-A822 A840-A873 A882-A8B3 A8F2-A8F7 A8FB A90A-A925 A930-A946 A960-A97C A984-A9B2 A9CF "
    "AA00-AA28 AA40-AA42 AA44-AA4B AA60-AA76 AA7A AA80-AAAF AAB1 AAB5-AAB6 AAB9-AABD AAC0 AAC2 AADB-AADD "
    "AAE0-AAEA AAF2-AAF4 AB01-AB06 AB09-AB0E AB11-AB16 AB20-AB26 AB28-AB2E ABC0-ABE2 AC00-D7A3 D7B0-D7C6 "
    "D7CB-D7FB F900-FA6D FA70-FAD9 FB00-FB06 FB13-FB17 FB1D FB1F-FB28 FB2A-FB36 FB38-FB3C FB3E FB40-FB41 "
    "FB43-FB44 FB46-FBB1 FBD3-FD3D FD50-FD8F FD92-FDC7 FDF0-FDFB FE70-FE74 FE76-FEFC FF21-FF3A FF41-FF5A "
    "FF66-FFBE FFC2-FFC7 FFCA-FFCF FFD2-FFD7 FFDA-FFDC"
)
_EXTRA_WORD_LETTERS = (  # marks, modifiers and the soft hyphen that continue a word but not a hyphenated compound
    "AD 2C2-2C5 2D2-2DF 2E5-2EB 2ED 2EF-36F 375 378-379 384-385 3F6 483-487 55A-55F 591-5BD 5BF 5C1-5C2 5C4-5C5 "
    "5C7 615-61A 64B-65E 670 6D6-6E4 6E7-6ED 6FD-6FE 70F 711 730-74C 7A6-7B0 7EB-7F3 900-903 93C 93E-94E 951-955 "
    "962-963 981-983 9BC 9BE-9C4 9C7-9C8 9CB-9CD 9D7 9E2-9E3 A01-A03 A3C A3E-A4F A81-A83 ABC ABE-ACF B82 BBE-BC2 "
    "BC6-BC8 BCA-BCD C01-C03 C3E-C56 D3E-D44 D46-D48 E31 E34-E3A E47-E4E EB1 EB4-EBC EC8-ECD"
)
_DIGITS = (
    "30-39 660-669 6F0-6F9 7C0-7C9 966-96F 9E6-9EF A66-A6F AE6-AEF B66-B6F BE6-BEF C66-C6F CE6-CEF D66-D6F "
    "E50-E59 ED0-ED9 F20-F29 1040-1049 1090-1099 17E0-17E9 1810-1819 1946-194F 19D0-19D9 1A80-1A89 1A90-1A99 "
    "1B50-1B59 1BB0-1BB9 1C40-1C49 1C50-1C59 A620-A629 A8D0-A8D9 A900-A909 A9D0-A9D9 AA50-AA59 ABF0-ABF9 "
    "FF10-FF19"
)
SYMBOLS = (  # characters that are a token of their own (where no longer class starts with them)
    "24-26 2B 2F 3A-3B 3D 5C 5E 7C 7E A1 A5-A9 AC AE-B1 B4 B6-B8 BF D7 F7 37E 387 589 5BE 5C0 5C3 5C6 5F3-5F4 "
    "600-603 606-60C 614 61B 61E-61F 66A 66D 6D4 700-70D 7F6-7F8 964-965 E3F E4F 1FBD 2016-2017 2020-2023 "
    "2030-2038 203B 203E-2042 2044 207A-207E 208A-208E 20A4 2100-2101 2103-2106 2108-2109 2114 2116-2118 "
    "211E-2123 2125 2127 2129 212E 213A-213B 2140-2144 214A-214D 214F 2155-215E 2190-2BFF 3001-3002 3012 30FB "
    "FF01-FF0F FF1A-FF20 FF3B-FF40 FF5B-FF65 FFE0-FFE1 FFE5-FFE6"
)


def char_class(ranges: str) -> str:
    """The body of a regex character class for ``"41-5A 61 ..."``."""
    parts = []
    for item in ranges.split():
        low, _, high = item.partition("-")
        parts.append(re.escape(chr(int(low, 16))) + ("-" + re.escape(chr(int(high, 16))) if high else ""))
    return "".join(parts)


def nocase(word: str) -> str:
    """``word`` with its ASCII letters in either case, as the jar's case-insensitive literals match (re.IGNORECASE
    would also match Unicode case variants such as the Kelvin sign)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isascii() and c.isalpha() else re.escape(c) for c in word)


def words_of(spec: str) -> str:
    """Alternatives of ``spec``'s words, case-insensitive, longest first; ``=`` before a word keeps its first letter's
    case as written."""
    words = sorted(spec.split(), key=lambda w: -len(w.lstrip("=")))
    return "|".join(re.escape(w[1]) + nocase(w[2:]) if w.startswith("=") else nocase(w) for w in words)


# ---------------------------------------------------------------------------------------------------------------
# Pieces of the token classes
# ---------------------------------------------------------------------------------------------------------------
LETTER_CHARS = char_class(_UNICODE_LETTERS)
MARK_CHARS = char_class(_EXTRA_WORD_LETTERS)
DIGIT_CHARS = char_class(_DIGITS)
ENTITY_LETTER = "&[aeiouAEIOU](?:" + words_of("acute grave uml") + ");"   # caf&eacute;
LETTER = f"(?:[{LETTER_CHARS}{MARK_CHARS}]|{ENTITY_LETTER})"              # a word's letter
LETTER_OR_DIGIT = f"(?:[{LETTER_CHARS}{MARK_CHARS}{DIGIT_CHARS}]|{ENTITY_LETTER})"
DIGIT = f"[{DIGIT_CHARS}]"
ALNUM = f"[{LETTER_CHARS}{DIGIT_CHARS}]"                                  # a hyphenated compound's letter or digit
SPACE = "[ \\t\\xa0\\u2000-\\u200a\\u3000]"
SPACE_OR_NL = "[ \\t\\xa0\\u2000-\\u200a\\u3000\\n]"
APOSTROPHE = "(?:['\\x92\\u2019]|&" + nocase("apos") + ";)"
APOSTROPHE_LIKE = "(?:['\\x92\\u2019`\\x91\\u2018\\u201b]|&" + nocase("apos") + ";)"
CLITIC = APOSTROPHE + "(?:[msdMSD]|" + words_of("re ve ll") + ")"         # 's 'm 'd 're 've 'll
NEG_CLITIC = "[nN]" + APOSTROPHE_LIKE + "[tT]"                           # n't
WORD = f"{LETTER}{LETTER_OR_DIGIT}*(?:[.!?]{LETTER}{LETTER_OR_DIGIT}*)*"  # letters first; inner . ! ? (scene.The)
NOT_N_STEM = "[A-Za-z\\xad]*[A-MO-Za-mo-z]\\xad*"                       # what n't splits off: ASCII, not ending in n
SGML = ("<(?:[!?][A-Za-z-][^>\\r\\n]*|[A-Za-z][\\w:.-]*(?:[ ]+[A-Za-z][\\w:.-]*(?:[ ]*=[ ]*(?:'[^']*'|\"[^\"]*\"))?)*"
        "[ ]*/?|/[A-Za-z][\\w:.-]*)[ ]*>").replace("\\w", "A-Za-z0-9_")
_NAMED_ACRONYMS = ("(?:" + words_of("Canada Sino Korean EU Japan non") + ")-" + nocase("U.S") + "|" + nocase("U.S.-")
                   + "(?:" + nocase("U.K") + "|" + nocase("U.S.S.R") + ")")
ACRONYM = f"(?:{_NAMED_ACRONYMS}|[A-Za-z](?:\\.[A-Za-z])*)"               # U.S, A.B.C, and one letter
DOTTED_ACRONYM = f"(?:{_NAMED_ACRONYMS}|[A-Za-z](?:\\.[A-Za-z])+)"
QUOTE_MARKS = "[`\\u2018\\u2019\\u201a\\u201b\\u201c\\u201d\\x91-\\x94\\u201e\\u201f\\u2039\\u203a\\xab\\xbb]"
URL_END = '[^ \\t\\n\\f\\r"<>|.!?(){},-]'
URL_PATH = f'(?:/[^ \\t\\n\\f\\r"<>|()]+{URL_END})?'
HYPHENATED = f"[A-Za-z0-9][A-Za-z0-9.,\\xad]*(?:-(?:{DOTTED_ACRONYM}\\.|[A-Za-z0-9\\xad]+))+"
ELISION = f"[dDoOlL]{APOSTROPHE_LIKE}{ALNUM}"                            # d'Artagnan, o'clock
COMPOUND = f"(?:{ELISION})?{ALNUM}+(?:[-_\\u058a\\u2010\\u2011](?:{ELISION})?{ALNUM}+)*"
CAPS_AND = "[A-Z]+(?:(?:[+&]|&" + nocase("amp") + ";)[A-Z]+)+"              # AT&T
IN_SENTENCE = "[,;:\\u3001]"
PUNCTUATION = "[,;:\\u3001?!.\\xa1\\xbf\\u037e\\u0589\\u061f\\u06d4\\u0700-\\u0702\\u07fa\\u3002=/]"
CURRENCY = "[\\xa2\\xa3\\xa4\\xa5\\x80\\u20a0\\u20ac\\u060b\\u0e3f\\u20a4\\uffe0\\uffe1\\uffe5\\uffe6]"

# Abbreviations that keep their period: AFTER_LOWER ones are usually followed by a lower-case word (months, days,
# states, companies; at a sentence end their period is given again), BEFORE_NAME ones by a name (titles; acronyms
# too), BEFORE_NUMBER ones keep it only before a number.
_AFTER_LOWER = (
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Mon Tue Tues Wed Thu Thurs Fri Ala Ariz =Az =Ark Calif Colo "
    "Conn Ct Dak =Del Fla Ga =Ill Ind Kan Kans Ky =La =Mass Md Mich Minn =Miss Mo Mont Neb Nev Okla =Ore =Pa Penn "
    "Tenn =Tex Va Vt =Wash Wis Wisc Wyo Inc Co Cos Corp Ltd Plc Rt Bancorp Bhd Assn Univ Intl Sys tel est ext sq Jr "
    "Sr Bros Ed.D Ph.D Blvd Rd Esq etc al seq Bldg")
_BEFORE_NAME = (
    "Mr Mrs Ms =Miss Dr Drs Prof Profs Sen Sens Rep Reps Atty Attys Lt Col Gen Messrs Gov Govs Adm Rev Maj Sgt Cpl "
    "Pvt Capt St Ste Ave Pres Lieut Hon Brig Cmdr Comdr Pfc Spc Supt Supts Det Mt Ft Adj Adv Asst Assoc Ens Insp Mlle "
    "Mme Msgr Sfc vs Alex Wm Jos Cie a.k.a cf TREAS Ph Invt Elec Natl Mfg Mtg Dept")
_BEFORE_NUMBER = "ca fig figs prop no nos art bldg pp op"
_PTY = "Pty Pte Ptys Ptes Ppty Ppte Pptys Pptes"  # P, p?, t, then y or e in lower case only, s?
AFTER_LOWER = words_of(_AFTER_LOWER) + "|" + nocase("P") + "[pP]?" + nocase("t") + "[ye][sS]?"
BEFORE_NAME = ACRONYM + "|" + words_of(_BEFORE_NAME)  # an acronym first: a.k.a.b. is one
BEFORE_NUMBER = words_of(_BEFORE_NUMBER)
# Words whose period is an abbreviation's (see AFTER_LOWER, BEFORE_NAME, BEFORE_NUMBER), lower case
ABBREVIATIONS = frozenset(w.lstrip("=").lower() for w in " ".join(
    [_AFTER_LOWER, _BEFORE_NAME, _BEFORE_NUMBER, _PTY]).split())
# After an acronym and spaces, these words (capitalized, then a space) make its period end the sentence too.
SENTENCE_STARTS = words_of(
    "=About =According =Additionally =After =An =A =As =At =But =Earlier =He =Her =Here =However =If =In =It =Last "
    "=Many =More =Mr. =Ms. =Now =Once =One =Other =Our =She =Since =So =Some =Such =That =The =Their =Then =There "
    "=These =They =This =We =When =While =What =Yet =You")
FILE_EXTENSIONS = words_of(
    "bat bmp c class cgi cpp dll doc docx exe gif gz h htm html jar java jpeg jpg mov mp3 pdf php pl png ppt ps py "
    "sql tar txt wav x xml zip")
SPLIT_WORDS = {"cannot": 3, "'twas": 3, "'tis": 2, "gonna": 2, "gotta": 2, "lemme": 2, "gimme": 2, "wanna": 2}
