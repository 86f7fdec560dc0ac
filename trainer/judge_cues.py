"""The default PRM judge: reads the next state for the cues people and tools actually give.

No model: a correction, complaint, redo or repeated request ("No, that's wrong.", "I asked for
lowercase", "Try again", "Nein, das stimmt nicht.", "不对") is -1, and so is a request to change
the answer's form or content ("Shorter please.", "in celsius please", "Ohne Emojis bitte.",
"我是素食者，别放肉"), even after a thanks; thanks and approval ("Perfect, exactly what I
wanted!", "Danke, genau das wollte ich!", "谢谢，正是我想要的！") are +1; a tool's error is -1
and its successful output +1 (the action worked, as OpenClaw-RL scores it); anything else (a
neutral follow-up, a new topic, the end of the session) is 0, so the judge never invents a
reward. Each vote is a text that ends in ``\\boxed{...}`` and says which cues it saw, so it
always parses and an admin can read why.

The cues are word lists in English, German, Chinese, French and Spanish, all scanned on every
message (no language detection: people mix languages, and a cue of one language rarely means
something else in another). Chinese has no spaces, so its cues are substrings, and a few
idioms that contain a negative character are read first ("不错" is praise, "没问题" is not a
complaint). The English rules were written on the ``tune`` half of
``bench/data/next_states.json``, the other languages and the requests on the ``tune`` half of
``bench/data/next_states_multilingual.json``; ``python -m bench.judging`` measures them on the
held-out halves.

>>> cue_score("[user] No, that's wrong. Paris is in France.")
-1
>>> cue_score("[user] Perfect, exactly what I wanted!")
1
>>> cue_score("[user] And insects?")
0
>>> cue_score("[user] Danke, aber bitte kürzer.")
-1
>>> cue_score("[user] 谢谢，正是我想要的！")
1
"""

from __future__ import annotations

import re

# What the judging service writes before each part of a next state.
_PART = re.compile(r"^\[(user|user feedback|tool result[^\]]*)\] ?", re.MULTILINE)

_LANGS = r"(english|spanish|german|french|chinese|italian|portuguese|japanese|dutch)"
_SPRACHEN = r"(deutsch|englisch|französisch|spanisch|chinesisch|italienisch)"
_CODE = r"(python|javascript|typescript|java|rust|golang|go|c\+\+|c#|ruby|php|kotlin|swift)"

# Idioms read before everything else: they look negative (or positive) word by word and are not.
_POSITIVE_IDIOMS = [
    r"\bnot (too |that |half )?bad\b",
    r"\bno (problem|worries|prob)\b",
    r"\bkein problem\b",
    r"\bpasst (schon|so)\b",
    r"\bpas mal\b",
    r"\bno hay problema\b",
    r"(还|挺|很|真|蛮)?不错",
    r"没问题",
    r"不客气",
]
# Phrases that only look like a cue: "不好意思" opens a polite question, not a complaint.
_NEUTRAL_IDIOMS = [r"不好意思", r"no idea"]
# Sarcasm and complaints that no praise word around them can outweigh.
_SARCASM = [
    r"\b(thanks|thank you) for nothing\b",
    r"\bwall of text\b",
    r"\bvery funny\b",
    r"\byeah,? right\b",
    r"\b(danke )?für (gar )?nichts\b",
    r"\bna (toll|super|prima)\b",
    r"\bsehr witzig\b",
    r"\bmerci pour rien\b",
    r"\btrès drôle\b",
    r"\bgracias por nada\b",
    r"\bmuy gracioso\b",
    r"呵呵",
    r"说了等于没说",
    r"废话",
    # a failure reported back ("great, now it crashes again"): no praise outweighs it
    r"\bcrash(es|ed|ing)?\b|\b(still|is|it's) broken\b",
    r"\bstürzt\b[^.!?]{0,30}\bab\b|\babsturz\b|\bkaputt\b",
    r"崩溃|闪退|又(报错|出错|坏了|挂了)",
]
# Corrections, complaints, redo requests: the verdict that the answer missed.
_NEGATIVE = [
    r"^((lol|lmao|haha|um+|uh+|erm|hmm+|ugh)[,.!]?\s*)?(no|nope|nah|nein|nö|non)\b",
    r"\b(wrong|incorrect|inaccurate|mistaken|mistakes?|misspel\w*|typos?)\b",
    r"(^|[,;.]\s*)not\b",
    r"\bnot (right|correct|true|quite|what|a|an|it|that|helpful|useful|accurate|enough|at all)\b",
    r"\b(isn't|is not|aren't|wasn't|doesn't|does not|didn't|did not|don't|do not|can't|won't)\b",
    r"\bnever\b",
    r"\b(i|we) (asked|said|told|meant|wanted|specified|requested)\b",
    r"\bagain\b|\bredo\b|\bretry\b|\bonce more\b",
    r"\b(forgot|forgotten|missed|ignored|skipped|omitted)\b",
    r"\b(way )?too (long|short|technical|formal|informal|verbose|wordy|complicated|complex)\b",
    r"\btoo vague\b",
    r"\b(useless|unhelpful|pointless|nonsense|boring|confusing|terrible|awful|worse)\b",
    r"\bstill\b",
    r"\bmeh\b",
    r"\b(not|never) (listening|reading)\b",
    r"\bmixed (it |them |that |those |\w+ )?up\b|\bnot (even )?close\b|\bgot (it|that) backwards\b",
    r"\bone more (time|try|go)\b|\b(try|do) (it|that|this) over\b",
    # German
    r"\b(falsch|quatsch|unsinn|blödsinn|fehlerhaft)\b",
    r"\bstimmt (so |leider |doch )?nicht\b",
    r"\bnicht (richtig|korrekt|wahr|ganz|das|was|hilfreich|beantwortet|gefragt|gemeint)\b",
    r"(^|[,;.]\s*)nicht\b",
    r"\b(viel |etwas |deutlich )?zu (lang|kurz|kompliziert|technisch|ausführlich|förmlich|vage)\b",
    r"\b(nutzlos|unbrauchbar|sinnlos)\b",
    r"\bhilft (mir )?(überhaupt |gar |leider )?nicht\b|\bbringt (mir )?(überhaupt |gar )?nichts\b",
    r"\b(nochmal|noch ?mal|noch einmal|erneut)\b|\bversuch (es|'s|das)\b",
    r"\bich (habe|hatte|hab) (doch |dich |nach |um )?(\w+ )?(gefragt|gesagt|gebeten)\b",
    r"\b(immer noch|schon wieder)\b",
    r"\b(vergessen|ignoriert|übersehen)\b",
    r"\b(funktioniert|klappt|passt|geht|hilft) (\w+ )?(noch |immer noch |leider |so )?nicht\b",
    r"\bversteh(e)? (das |es |dich |ich )?(nicht|kein wort)\b",
    r"\b(noch )?(ein(en)?|einen weiteren|ein weiterer) (versuch|anlauf)\b",
    # French and Spanish
    r"\b(faux|erroné|incorrecte?)\b|\bc'est pas\b|\bpas (ça|ce que|correct|juste|vrai)\b",
    r"\btrop (long|court|compliqué|technique)\b|\brecommence\b|\bréessaie\b",
    r"\b(está|esta|es|muy) mal\b|\b(incorrecto|equivocado|falso)\b|\bno es (correcto|eso|así)\b",
    r"\bdemasiado (largo|corto|complicado|técnico)\b|\botra vez\b|\bde nuevo\b|\binténtalo\b",
    # Chinese
    r"不对|错了|有错|[算写搞弄说答]错|不正确|不准确|不是这样|不是吧|不是我要的|不是我想要的",
    r"答非所问|没回答|没有回答|没用|没什么用|不行|不好|看不懂|听不懂|不明白|不懂|没懂",
    r"太(长|短|复杂|啰嗦|罗嗦|难|笼统)",
    r"(^|[，,。；;])不是|明明是|应该是|我(说|问|要)的是|我不是说",
    r"重新|再来|再试|重写|再写|换一个|又是|还是不|忘了|再(给|出|换)(我)?(一|个|几)",
]
# Requests to change the answer's form or content: it missed what the user wanted.
_REQUEST = [
    # length, simplicity, format
    r"\b(shorter|briefer|longer|simpler|more concise|less (formal|technical|wordy))\b",
    r"\b(kürzer|knapper|länger|ausführlicher|einfacher|verständlicher)\b",
    r"\bplus (court|bref|simple|long|clair|concis)\b|\bmás (corto|breve|simple|sencillo|claro)\b",
    r"简短|简洁|简单(一)?点|短(一)?点|长(一)?点|详细(一)?点|具体(一)?点|通俗",
    r"\bbullet(s| points?)?\b|\bnumbered list\b|\b(as|in|into) (a )?(list|table)\b",
    r"\bformat (it|that|this)\b|\b(lower|upper) ?case\b|\ball caps\b|\bcapital letters\b",
    r"\bstichpunkt\w*|\baufzählung\w*|\b(als|in einer?) (liste|tabelle)\b|\btabellarisch\b",
    r"\bklein ?(schreiben|geschrieben|buchstaben)\b|\bkleinschreibung\b|\bgroßbuchstaben\b",
    # "Geht das auch lockerer?", "could it be a bit more casual?": a comparative asked for
    r"\b(geht|ginge|klappt) (das|es) (auch )?(noch )?(etwas |ein bisschen |bisschen )?\w+er\?",
    r"\b(can|could) (you make )?(it|this|that) (be )?(a bit |a little |slightly )?more \w+\b",
    r"列表|表格|分点|要点|条目|小写|大写",
    r"\bemojis?\b|\bemoticons?\b|\bsmileys?\b|表情",
    # units
    r"\b(in|into|use|using|to) (degrees )?(celsius|centigrade|kilo(metre|meter|gram)s?|km|kg)\b",
    r"\bmetric\b|\bmetrisch\w*|\bmétrique\b|\bmétrico\b|\bcelsius\b",
    r"\b(not|instead of|no more|kein\w*|nicht in) (miles|pounds|lbs|fahrenheit|feet|inches)\b",
    r"\b(keine|nicht in) (meilen|pfund|fahrenheit|fuß|zoll)\b",
    r"\bin (grad )?(kilometern|km|kilo(gramm)?|kg|metern|zentimetern|litern|gramm)\b",
    r"公制|公里|公斤|千克|摄氏|厘米|毫升|(不要|别用?)(英里|磅|华氏|英尺|英寸)",
    # diet
    r"\bvegetarian\w*|\bvegan\w*|\bpescatarian\b|\bmeat-?free\b|\b(no|without) (meat|fish)\b",
    r"\bvegetarier\w*|\bvégétarien\w*|\bvegetarian[oa]s?\b",
    r"\b(ohne|kein) fleisch\b|\bsans viande\b|\bsin carne\b",
    r"素食|吃素|不吃肉|别放肉|不要(放)?肉",
    # name
    r"\bcall me\b|\bmy name('s| is)\b|\baddress me\b",
    r"\b(ich heiße|nenn(e)? mich|sprich mich|mein name ist)\b",
    r"\b(appelle-moi|je m'appelle|llámame|me llamo)\b",
    r"叫我|称呼我|我叫|我的名字",
    # level
    r"\b(i'm|i am) (a |an |just a |total |complete |absolute )*(beginner|newbie|novice)\b",
    r"\bjargon\b|\bplain (english|words|language)\b|\bsimple (terms|words|language)\b|\beli5\b",
    r"\b(anfänger\w*|einsteiger\w*|laie|fachbegriff\w*|fachwörter\w*|fachchinesisch)\b",
    r"\bdébutant\w*|\bprincipiante\b",
    r"初学者|新手|小白|术语|专业词",
    # stack
    rf"\bi (only )?(use|code in|program in|work in|write|'m using|am using) {_CODE}\b",
    rf"\bich (programmiere|entwickle|arbeite|nutze|benutze|verwende)( \w+)? (in |mit )?{_CODE}\b",
    rf"我(用|使用)的?是|我(只)?用{_CODE}",
    # the reply's language
    rf"\b(answer|reply|respond|write( it)?|say (it|that)) in {_LANGS}\b|\bin {_LANGS},? please\b",
    rf"\b(auf|in) {_SPRACHEN} (antworten|bitte|schreiben)\b|\bbitte (auf|in) {_SPRACHEN}\b",
    r"\ben (français|anglais|espagnol|allemand)\b|\ben (español|inglés|alemán|francés)\b",
    r"用(中文|英文|英语|汉语|德语|法语|日语|西班牙语)",
    # "instead", "rather"
    r"\b(you|please)\b[^.?!]{0,40}\binstead\b|\binstead,? please\b|\b(stattdessen|anstatt)\b",
    r"(不要|别)用|能不能.{0,8}一点|换成",
]
_POSITIVE = [
    r"\b(thanks|thank you|thank u|thx|ty|cheers|appreciate[ds]?|appreciated|grateful)\b",
    r"\b(perfect(ly)?|great|awesome|excellent|brilliant|fantastic|wonderful|amazing|superb)\b",
    r"\b(nice|lovely|spot on|exactly|love it|well done|good job|helpful|helped)\b",
    r"\b(works|worked|that's right|that is right|correct|right on)\b",
    r"\b(nailed it|clever|makes sense|got it)\b|(^|\b)(cool|neat|sweet)([,!.]|$)",
    # German
    r"\b(danke|dankeschön|vielen dank|besten dank)\b",
    r"\b(super|perfekt|prima|genial|wunderbar|ausgezeichnet|hervorragend)\b",
    r"(^|\b)(klasse|spitze|genau|stark)([,!.]|$)|\bgenau (das|so|richtig)\b",
    r"\b(gefällt mir|hilfreich|geholfen|verstanden|sehr gut|gut erklärt)\b",
    r"\bhat (\w+ )?(funktioniert|geklappt)\b|\b(funktioniert|klappt)( jetzt| wieder)?\s*[!.]",
    r"(^|\b)top([,!.]|$)|\bläuft( jetzt| wieder)?\b",
    # French and Spanish
    r"\b(merci|parfait|génial|excellent|exactement|impeccable|nickel|ça marche)\b",
    r"\b(gracias|perfecto|genial|excelente|exacto|justo lo que|me encanta|funcionó)\b",
    # Chinese
    r"谢谢|多谢|谢啦|谢了|感谢|太好了|完美|很好|非常好|好棒|很棒|真棒|厉害|赞",
    r"正是|就是这个|正合适|解决了|搞定|有用|有帮助|明白了|懂了|清楚|喜欢|成功了",
    r"跑通了|可以了|能用了|好用",
    r"👍|🙏|🎉|❤️",
]
# "Thanks, but ...": the objection after the contrast is what the user means.
_CONTRAST = re.compile(r"\b(but|though|however|aber|doch|mais|pero)\b|但|不过|可是")
_TOOL_ERROR = re.compile(
    r"\b(error|exception|traceback|failed|failure|not found|denied|invalid|refused|timed? ?out|"
    r"unauthori[sz]ed|forbidden|fehler|fehlgeschlagen|nicht gefunden|verweigert|ungültig|"
    r"erreur|échec|introuvable|fallo|no encontrado)\b|\"ok\"\s*:\s*false|"
    r"\b(status|http)\W+[45]\d\d\b|错误|失败|找不到|拒绝|无效|异常|超时",
    re.IGNORECASE,
)
# A positive word right after a negation ("not helpful", "doesn't work", "不清楚") or, in
# German, right before one ("hilft nicht", "funktioniert nicht") is not approval.
_NEGATED_BEFORE = re.compile(
    r"((not|n't|never|no longer|nicht|kein\w*|pas|no)\s+(\w+\s+)?|[不没别]|不太|不够|不是很)$"
)
_NEGATED_AFTER = re.compile(r"^\s+((\w+\s+)?(nicht|nie|kaum)|pas)\b")
_WORD = re.compile(r"[^\W\d_]+'?[^\W\d_]*")
_CJK = re.compile(r"[\u3400-\u9fff]")
_STOPWORDS = frozenset(
    "a an the and or but to of in on at for with is are was be it this that my me you your i "
    "now then so do can could would will just also one what how that's it's i'm please "
    "very really pretty tbh honestly".split()
)
# The same for hints in German, French and Spanish (not used to spot a repeated request).
_HINT_STOPWORDS = _STOPWORDS | frozenset(
    "das der die den dem des ein eine einen ist sind war du ich er sie es wir mir mich dir dich "
    "mein meine dein deine bitte mal doch aber und oder noch schon jetzt hier dass viel sehr "
    "c'est le la les un une de du des et ou je tu il elle est ce ça s'il te vous plaît "
    "el los las una del yo tú eso esto por favor lo que".split()
)
# Words that only repeat the verdict: "No, that's wrong. Try again." teaches nothing.
_VERDICT_WORDS = frozenset(
    "try fix redo answer response again wrong antwort versuch richtig diesmal réponse "
    "respuesta".split()
)
# CJK characters and words that carry no request: "重新写一个。" is "Try again." in Chinese.
_CJK_FILLER = re.compile(
    r"一个|一下|一次|一遍|回答|答案|问题|[写吧吗呢了啊的请你我他她它这那是个就]"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])")

_IDIOMS = re.compile("|".join(_POSITIVE_IDIOMS))
_NEUTRAL = re.compile("|".join(_NEUTRAL_IDIOMS))
_SARCASM_RE = re.compile("|".join(_SARCASM))
_NEGATIVE_RE = [re.compile(p) for p in _NEGATIVE]
_REQUEST_RE = [re.compile(p) for p in _REQUEST]
_POSITIVE_RE = [re.compile(p) for p in _POSITIVE]


def split_next_state(next_state: str) -> tuple[list[str], list[str]]:
    """The user's words and the tool results in a next state, in order."""
    user: list[str] = []
    tools: list[str] = []
    matches = list(_PART.finditer(next_state or ""))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(next_state)
        text = next_state[match.end() : end].strip()
        (tools if match.group(1).startswith("tool") else user).append(text)
    return user, tools


def _normalise(text: str) -> str:
    return text.lower().replace("\u2019", "'").strip()


def text_cues(text: str, *, request: str = "") -> tuple[list[str], list[str]]:
    """The negative and the positive cues found in one message of the user's. A request to
    change the answer is listed as ``asks for ...`` and sarcasm as ``sarcasm: ...``."""
    lowered = _NEUTRAL.sub(" ", _normalise(text))
    positive = [m.group(0) for m in _IDIOMS.finditer(lowered)]
    lowered = _IDIOMS.sub(" ", lowered)
    negative = [f"sarcasm: {m.group(0)}" for m in _SARCASM_RE.finditer(lowered)]
    lowered = _SARCASM_RE.sub(" ", lowered)
    negative += [m.group(0).strip(" ,;.") for p in _NEGATIVE_RE for m in p.finditer(lowered)]
    negative += [f"asks for {m.group(0)}" for p in _REQUEST_RE for m in p.finditer(lowered)]
    for pattern in _POSITIVE_RE:
        for match in pattern.finditer(lowered):
            before = lowered[max(0, match.start() - 20) : match.start()]
            after = lowered[match.end() : match.end() + 20]
            if _NEGATED_BEFORE.search(before) or _NEGATED_AFTER.search(after):
                negative.append(f"negated {match.group(0)}")
            else:
                positive.append(match.group(0))
    if not positive and _restates(lowered, _normalise(request)):
        negative.append("asks for the same thing again")
    return negative, positive


def _restates(text: str, request: str) -> bool:
    """The user repeats (at least two words of) the request instead of asking something new."""
    if not request or "?" in text:
        return False
    # "please" counts here: "In Spanish please!" after "Reply in Spanish please: ..." repeats.
    words = {w for w in _WORD.findall(text) if len(w) > 2 and w not in _STOPWORDS - {"please"}}
    shared = words & set(_WORD.findall(request))
    return len(shared) >= 2 and len(shared) * 2 >= len(words)


def score_from_cues(negative: list[str], positive: list[str], text: str) -> int:
    """-1 when the user objects, asks for a change or is sarcastic (also "thanks, but ..."), +1
    when they approve, else 0."""
    if any(cue.startswith(("sarcasm: ", "asks for ")) for cue in negative):
        return -1
    if negative and (len(negative) >= len(positive) or _CONTRAST.search(_normalise(text))):
        return -1
    return 1 if positive else 0


def cue_vote(next_state: str, *, request: str = "") -> tuple[int, str]:
    """The cue judge's vote on a next state, and its text (ending in ``\\boxed{score}``)."""
    user, tools = split_next_state(next_state)
    if user:
        text = " ".join(user)
        negative, positive = text_cues(text, request=request)
        score = score_from_cues(negative, positive, text)
        why = f"user cues: negative {negative or 'none'}, positive {positive or 'none'}"
    elif tools:
        errors = [m.group(0) for t in tools for m in _TOOL_ERROR.finditer(t)]
        score = -1 if errors else 1
        why = f"tool result: errors {errors}" if errors else "tool result without an error"
    else:
        score, why = 0, "no user message or tool result to read"
    return score, f"{why} \\boxed{{{score}}}"


def cue_score(next_state: str, *, request: str = "") -> int:
    return cue_vote(next_state, request=request)[0]


def cue_hint(next_state: str, *, keep_complaint: bool = False) -> str | None:
    """Hindsight from a next state the cue judge scored -1: the user's own sentences that say
    more than a verdict (the complaint around them dropped: "No, that's not what I asked for."
    teaches a teacher to apologise, not what was asked for), or the tool's error; None when it
    carries nothing to learn from. ``keep_complaint``: the user's whole message when any of it
    says more than a verdict (the judge's fallback when the sentences alone are no hint, e.g.
    "The correct answer is Paris.", which reads as praise without its "No, that's wrong.").

    >>> cue_hint("[user] No, that's not what I asked for. Please start with 'Sure!'")
    "Please start with 'Sure!'"
    >>> cue_hint("[user] No, that's wrong. Try again.") is None
    True
    >>> cue_hint("[user] Nein, das stimmt nicht. Bitte kürzer.")
    'Bitte kürzer.'
    >>> cue_hint("[user] 不对。请用公制单位。")
    '请用公制单位。'
    """
    user, tools = split_next_state(next_state)
    if user:
        sentences = [s for text in user for s in _SENTENCE_END.split(text.strip()) if s.strip()]
        kept = [s.strip() for s in sentences if _says_more_than_a_verdict(s)]
        if keep_complaint and kept:
            return " ".join(text.strip() for text in user)
        return _join(kept) if kept else None
    errors = [t for t in tools if _TOOL_ERROR.search(t)]
    return f"The tool answered: {errors[0]}" if errors else None


def _join(sentences: list[str]) -> str:
    """Sentences joined as they were written: with a space, without one after a CJK stop."""
    text = sentences[0]
    for sentence in sentences[1:]:
        text += sentence if text.endswith(("。", "！", "？")) else f" {sentence}"
    return text


def _says_more_than_a_verdict(sentence: str) -> bool:
    """A word (or two CJK characters) left once the negative cues, the sarcasm, the stop words
    and the verdict words are gone."""
    rest = _SARCASM_RE.sub(" ", _normalise(sentence))
    for pattern in _NEGATIVE_RE:
        rest = pattern.sub(" ", rest)
    if len(_CJK.findall(_CJK_FILLER.sub("", rest))) >= 2:
        return True
    return any(
        len(w) > 2 and w not in _HINT_STOPWORDS and w not in _VERDICT_WORDS and not _CJK.match(w)
        for w in _WORD.findall(rest)
    )
