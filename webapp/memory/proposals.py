"""The memory a comment, correction or follow-up proposes: ``standing_preference(text)``.

The text is read clause by clause (sentences, then commas; a lone marker such as ``In future,``
or an ``if ...`` clause is read with the clause it belongs to). The first clause that states
a standing preference or a lasting fact about the person is proposed, trimmed to its standing
part: fillers, thanks and requests are cut off its ends, and so is what follows a ``because I
...``, as long as what is left still reads as standing. A text that holds a secret (a long token
of letters and digits, or a password with its value) proposes nothing.

The cues are a lexicon: ``proposal_cues`` for the spaced languages, the blocks below for
Chinese, Japanese and Korean, which are matched as substrings (no spaces between words).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from webapp.memory.proposal_cues import DE, EN, ES, FR, IT, PT, RU

ZH = r"""
lasting 以后都; 以后请; 以后要; 以后回答; 以后用; 以后的回答; 今后; 从现在开始; 从现在起; 从今以后;
  从今往后; 往后; 默认; 每次回答; 每个回答; (?:所有|全部)的?回答; 接下来都; 请?记住
always 总是; 一直; 永远; 始终; 都要; 每次; 不要再; 别再; 一律; 通常; 平时; 以后; 将来; 下次
directive 我希望你; 我想让你; 我要你; 你要; 你应该; 要用; 用; 使用; 回答; 回复; 写; 说; 讲; 解释;
  给我; 帮我; 加上; 包括; 避免; 不要; 别; 称呼; 记得; 务必; 一定要; 尽量; 希望
request 请你?; 能不能; 能否; 可以; 可不可以; 麻烦你?
modal 应该; 必须; 要; 得
subject ^(?:你|您)(?!以后|今后|要|应该|必须|得|每次|记得|可以|能|请); ^(?:这|那|它)
question [吗呢么嘛][。.!]*$; 什么; 为什么; 怎么; 哪(?!怕); 谁; 多少; 是不是; 有没有
fact 叫我(?!怎么|如何|干|做|去|来|别|不要|帮){NAME}; 称呼我; 我叫(?!你){NAME}; 我的名字(?:是|叫);
  我名字叫; 我(?:是|吃)(?:一个|一名)?(?:素食|纯素|素); 我吃素;
  我不吃(?:肉|猪肉|牛肉|羊肉|鱼|海鲜|辣|鸡蛋|蛋|乳制品|香菜); 我对.{1,8}过敏; 我乳糖不耐; 我是清真;
  我有糖尿病; 我不喝酒; 我(?:住在|生活在|居住在|来自|定居在|人在);
  我在.{1,8}(?:工作|生活|上学|读书|居住|定居); 我是(?!一个|个|好|坏).{1,4}人(?:$|[,.!。]);
  我(?:平时|一般|主要|通常|只|都)?(?:用|使用|写)(?:的是)? ?(?:python|java|c\+\+|c#|go|rust|
  javascript|typescript|php|ruby|kotlin|swift|sql|matlab|linux|windows|mac);
  我(?:平时|一般|主要|通常)?用.{1,12}(?:写代码|编程|开发); 我是(?:一名|一个|个)?.{0,8}(?:程序员|
  开发者|开发人员|工程师|码农|初学者|新手|小白|学生|研究生|老师|教师|医生|护士|律师|设计师|专家|
  研究员|会计|厨师|记者|翻译|退休); 我(?:刚|才)?开始学; 我(?:正)?在学(?!校); 我从事; 我是做.{1,8}的;
  我今年\d+岁; 我的母语是; 我母语; 我只会说;
  我(?:更|比较|一般|通常)?(?:喜欢|偏好|倾向于?|习惯)(?!这个|那个|这|那|它|你); 我不喜欢
setting (?:用|使用|采用)(?:公制|摄氏|公里|公斤|英制|华氏|米制|国际单位)
one_off 这个; 这次; 这一次; 刚才; 上面; 重新; 再来; 再写; 改成; 这段; 今天; 现在先; 暂时
complaint 错了; 不对; 错误; 不准确; 没用; 瞎说; 胡说; 太差
idiom 一如既往; 总是这么; 一直都很; 一直以来
filler 谢谢你?; 多谢; 感谢; 好的; 好吧; 对了; 另外; 还有; 嗯; 哦; 噢; 顺便说一下; 顺便; 记住; 因为
trailer 吧; 哦; 啊; 呀; 谢谢; 好吗; 可以吗; 行吗; 好不好
conditional ^(?:如果|假如|要是|当)
"""

JA = r"""
lasting これからは; 今後は?; 以後; これから先; 次から; 次回から; 今からずっと; デフォルトで; 毎回;
  (?:すべて|全て)の(?:回答|返答|答え); 覚えて(?:おいて|ください|て); 覚えといて
always いつも; 常に; 必ず; 絶対に; 決して; 基本的に; ずっと; これから; 今から; 一般的に; 次は
directive ちょうだい; ように; ほしい; 欲しい; しないで; ないで; べき; こと[。.!]*$; [てで][。.!]*$;
  てね; でね; 使って; 答えて; 書いて; 話して; 呼んで; 説明して; 返事して; にして
request ください; 下さい; くれ(?:ます|ません)か; もらえ(?:ます|ません)か; いただけ(?:ます|ません)か;
  頂けますか; お願い(?:します)?
modal べき; ように
subject ^(?:あなた|君|きみ|お前)は; ^(?:これ|それ)(?!から)
question か[。.!]*$; ですか; ますか; なぜ; どうして; 何(?:が|を)
fact (?:私|わたし|僕|ぼく|俺)の名前は; .{1,12}(?:と|って)呼んで; (?:私|わたし|僕|ぼく|
  俺)は(?:(?!大丈夫|元気|賛成|反対|満足|残念|平気|結構|同じ|そう|好き|嫌い|あなた|これ|
  それ)[^。!?、,]){1,15}?(?<![いな])です;
  (?:ベジタリアン|ヴィーガン|ビーガン|菜食主義者?)(?:です|だ|なので|なんで|をして);
  肉(?:は|を)?(?:食べません|食べない|食べられ); アレルギー(?:があり|がある|です|持ち); 乳糖不耐;
  に住んで(?:います|いる|る|おり); (?:出身|在住)です; から来ました; (?:python|java|rust|go|c\+\+|
  javascript|typescript|ruby|php|kotlin|swift)(?:を|で|は|が)(?:使って|書いて|開発|メイン|よく使|
  主に); (?:エンジニア|プログラマー?|開発者|初心者|学生|大学生|教師|先生|医者|医師|看護師|弁護士|
  デザイナー|研究者|専門家|主婦|会社員|公務員)(?:です|だ|なので|なんで|をしています);
  を(?:勉強|学ん)で(?:います|いる); を勉強中; \d+歳です; 母(?:語|国語)は;
  (?:方|ほう)が(?:好き|いい|良い|助かり|ありがたい); を好みます; が好みです
setting (?:メートル法|摂氏|キロメートル|華氏|ヤード・ポンド法)(?:を使|で統一|を使用)
one_off この回答; この答え; 今回; もう一度; やり直; これを; この部分; 今日; 今だけ; 一旦; さっきの
complaint 間違; 違います; 違う; 誤り; 役に立たない; ダメ; だめ
idiom いつもありがとう; いつも助か; 相変わらず; いつも通り
filler ありがとう(?:ございます)?; どうも; ところで; あと(?=[、,\s]); それと; ちなみに; そういえば;
  では(?=[、,\s]); じゃあ; えっと; はい(?=[、,\s])
trailer ね; よ; ありがとう(?:ございます)?
conditional ^もし
"""

KO = r"""
lasting 앞으로(?:는)?; 이제부터(?:는)?; 지금부터; 다음부터(?:는)?; 기본적으로;
  모든 (?:답변|대답|응답); 매번; 기억해 ?(?:줘|주세요|둬|두세요)
always 항상; 늘; 언제나; 절대; 꼭; 반드시; 일반적으로; 다음에는; 다음번에는
directive 주세요; 줘; 줄래; 하세요; 하십시오; 마세요; 하지 ?마; 말아; 해라; 하라; 바랍니다; 좋겠;
  써 ?줘; 불러; 사용해; 답해; 대답해; 해요[.!]*$
request 주세요; 줄래(?:요)?; 주실래요; 줄 수 있; 주시겠; 주실 수; 해 ?줘; 부탁(?:해요|합니다|해)?
modal 해야; 야 해
subject ^(?:너는?|넌|당신은?|이건|그건|이것은|그것은|이 답변)
question (?:까|나요|니|냐)[.!]*$; 뭐; 왜; 어떻게; 언제(?!나); 어디; 누구
fact 제 이름은; 내 이름은; (?:이?라고|로) 불러;
  (?:저는|나는|전|난) [^?.!,]{1,20}?(?:입니다|이에요|예요|이야|(?<!좋)야)(?:[.!]|$);
  (?:채식주의자|비건)(?:예요|이에요|입니다|야|이야|라서|이라서); 채식(?:을 해|해요|합니다|중);
  고기를? (?:안 먹|먹지 않|못 먹); 알레르기가? 있; 유당불내증; 에 (?:살아|살고 있|삽니다|거주);
  출신(?:이에요|입니다|이야); (?:python|파이썬|자바|java|자바스크립트|javascript|타입스크립트|
  typescript|러스트|rust|go|c\+\+|코틀린|스위프트)(?:을|를|로|으로)? ?(?:주로 )?(?:사용해|
  사용합니다|써요|씁니다|개발해|개발합니다); (?:개발자|프로그래머|초보자?|학생|교사|선생님|의사|
  간호사|변호사|디자이너|연구원|엔지니어|전문가|회사원|대학생)(?:입니다|예요|이에요|이야|야|라서|
  이라서|니까); 배우(?:고 있어요|는 중); 공부하고 있어요; \d+살이에요; 모국어는;
  선호(?:해요|합니다|해); (?<![이그])(?:게|것이|편이) (?:좋아요|좋습니다|편해요)
setting (?:미터법|섭씨|킬로미터|화씨|야드파운드법)(?:을|를|으로|로) ?(?:사용|써|표시|알려)
one_off 이 답변; 이 대답; 이번(?:에|만)?; 다시; 지금(?!부터); 오늘; 표로; 방금
complaint 틀렸; 틀려; 틀린; 잘못; 오류; 쓸모없; 엉터리
idiom (?:항상|늘|언제나) (?:감사|고마)
filler 감사합니다; 고마워요?; 고맙습니다; 그리고; 아(?=[\s,.!]); 참(?=[\s,.!]); 그런데; 근데;
  네(?=[\s,.!]); 좋아요(?=[\s,.!]); 그럼
trailer 감사합니다; 고마워요?
conditional ^만약
"""

SPACED: dict[str, str] = {"en": EN, "de": DE, "es": ES, "fr": FR, "pt": PT, "it": IT, "ru": RU}
UNSPACED: dict[str, str] = {"zh": ZH, "ja": JA, "ko": KO}

# Words that follow "call me" without being a name ("call me back", "llámame luego").
NAME_STOPWORDS = (
    "a|an|the|not|back|later|tomorrow|when|if|once|soon|now|anytime|sometime|maybe|please|crazy|"
    "at|on|in|before|after|bitte|später|morgen|wenn|luego|mañana|cuando|si|plus|tard|demain|"
    "quand|depois|amanhã|quando|dopo|domani|потом|завтра|когда|если|пожалуйста"
)
SECRET_WORDS = (
    "password|passwort|kennwort|contraseña|mot de passe|senha|parola d'ordine|пароль|passcode|"
    "pin code|api key|api-key|apikey|access token|secret key|token"
)
SECRET_WORDS_UNSPACED = "パスワード|暗証番号|비밀번호|密码|口令"
SECRET_LINKS = r"is|was|ist|lautet|war|es|era|est|é|è|это|:|=|は|是|为|는|은"
MAX_CHARS = 300  # the longest memory proposed
MAX_CLAUSE = 600  # a longer clause is no standing statement (and reading it would be slow)
MAX_TEXT = 8000  # what of a long text is read
_PUNCT = " \t,.;:!?¡¿。、…-–—，；：！？\u3000"
_QUOTES = ('""', "''", "“”", "«»", "「」", "『』")


def _fold(text: str) -> str:
    """``text`` with Latin accents dropped, ``ё`` read as ``е`` and full-width forms (``，？``) as
    ASCII, one character for one."""
    out = []
    for char in text:
        if 0xFF01 <= ord(char) <= 0xFF5E:
            out.append(chr(ord(char) - 0xFEE0))
        elif char == "\u3000":
            out.append(" ")
        elif char in "ёЁ":
            out.append("е" if char == "ё" else "Е")
        elif not char.isascii() and ord(char) < 0x250:
            base = unicodedata.normalize("NFKD", char)[0]
            out.append(base if base.isascii() else char)
        else:
            out.append(char)
    return "".join(out)


def _cues(block: str) -> dict[str, tuple[str, ...]]:
    """A language's cues by field, from its block of ``field cue; cue`` lines."""
    lines: list[str] = []
    for line in block.splitlines():
        if line[:1].isspace() and lines:
            lines[-1] += line.strip()
        elif line.strip():
            lines.append(line.strip())
    found: dict[str, tuple[str, ...]] = {}
    for line in lines:
        name, _, cues = line.partition(" ")
        found[name] = tuple(cue.strip() for cue in cues.split(";") if cue.strip())
    return found


def _regex(cue: str, spaced: bool) -> str:
    """One cue as a regular expression: whole words where words have spaces between them."""
    name = (
        rf"(?!(?:{NAME_STOPWORDS})(?!\w))[^\W\d_][\w.'-]*" if spaced else r"[^\s,.!?;:、。]{1,12}"
    )
    body = _fold(cue).replace("{NAME}", name).replace("{CAP}", r"(?-i:[A-ZА-Я])\w*")
    if not spaced:
        return f"(?:{body})"
    return rf"(?<!\w)(?:{body})" + (r"(?!\w)" if cue[-1].isalnum() else "")


@cache
def _pattern(*names: str, at: str = "") -> re.Pattern[str]:
    """The cues of the fields ``names`` in every language: anywhere, at the ``head`` of a text, or
    as a whole word or phrase at its ``start`` or ``end``."""
    parts = []
    for blocks, spaced in ((SPACED, True), (UNSPACED, False)):
        for block in blocks.values():
            cues = _cues(block)
            for name in names:
                if at == "end" and name == "request" and not spaced:
                    continue  # a polite ending (ください, 주세요) belongs to the verb
                for cue in cues.get(name, ()):
                    regex = _regex(cue, spaced)
                    if at == "head":
                        regex = "^" + regex
                    elif at == "start":
                        regex = "^" + regex + (r"(?:[\s,.!:;]+|$)" if spaced else r"[\s,.!:;、。]*")
                    elif at == "end":
                        regex += r"[\s,.!?:;。、]*$"
                    parts.append(regex)
    return re.compile("|".join(parts) or "(?!)", re.IGNORECASE)


def _has(names: str, text: str) -> bool:
    return _pattern(*names.split()).search(text) is not None


def holds_secret(text: str) -> bool:
    """Whether ``text`` looks like it holds a password or key (then nothing is proposed)."""
    if re.search(r"(?<![\w+=-])(?=[\w+=-]*[A-Za-z])(?=[\w+=-]*\d)[\w+=-]{20,}", text, re.ASCII):
        return True
    value = rf"(?:\s*(?:{SECRET_LINKS})\s*|\s+(?=\S*[\d_!@#$%^&*+=/\\-]))\S"
    words = rf"(?:(?:{_fold(SECRET_WORDS)})(?![^\W\d_])|{SECRET_WORDS_UNSPACED})"
    return re.search(words + value, _fold(text), re.IGNORECASE) is not None


def _is_question(folded: str, core: str) -> bool:
    if folded.rstrip(" \"')」』").endswith("?") or folded.lstrip().startswith("¿"):
        return True
    return _has("question", core.rstrip(_PUNCT) or core) and not _has("lasting always", folded)


def _standing(clause: str) -> bool:
    """Whether ``clause`` states a standing preference or a lasting fact about the person."""
    folded = _fold(clause).strip()
    core = _cut(folded, "start")
    request = _has("request", folded)
    if _is_question(folded, core) and not request:
        return False
    lasting = _has("lasting", folded)
    if _has("one_off", folded) and not lasting:
        return False
    if _has("fact", folded) or _pattern("setting", at="head").search(core):
        return True
    if not (lasting or _has("always", folded)) or _has("complaint idiom", folded):
        return False
    if not lasting and _has("subject", core) and not _has("modal", core):
        return False
    return lasting or request or _has("directive", folded)


def _cut(text: str, at: str, once: bool = False) -> str:
    """``text`` less the fillers, requests and lasting markers at its start or end (one or all)."""
    pattern = _pattern("filler", "request", "lasting", at="start")
    if at == "end":
        pattern = _pattern("trailer", "request", "lasting", at="end")
    while text:
        match = pattern.search(_fold(text))
        if not match or not match.group():
            break
        text = (text[match.end() :] if at == "start" else text[: match.start()]).strip(_PUNCT)
        if once:
            break
    return text


def _is_glue(clause: str) -> bool:
    """Whether ``clause`` is only fillers or markers, read with the clause next to it."""
    rest = _cut(_cut(clause.strip(_PUNCT), "start"), "end")
    marker = _pattern("always", at="start").match(_fold(rest))
    return not rest or (marker is not None and marker.end() == len(rest))


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[!?。！？])|(?<=\.)(?=\s)|\n+|[;；]", text)
    pieces = [piece for piece in parts if piece and piece.strip()]
    sentences: list[str] = []
    for piece in pieces:
        after_abbreviation = re.search(
            r"(?<!\w)(?:dr|mr|mrs|ms|prof|st|sr|jr|e\.g|i\.e|etc|vs|z\.b|bzw|usw|ca)\.\s*$",
            sentences[-1] if sentences else "",
            re.IGNORECASE,
        )
        if after_abbreviation:
            sentences[-1] += piece
        else:
            sentences.append(piece)
    return sentences


def _clauses(text: str) -> list[str]:
    """The clauses of ``text``, a lone marker or an ``if`` clause joined to its neighbour."""
    clauses: list[str] = []
    for sentence in _sentences(text):
        pieces = re.split(r"(,\s*|，|、|:\s+|：|\s[-–—]\s|—)", sentence.strip())
        merged: list[str] = []
        carry = ""
        for index in range(0, len(pieces), 2):
            piece = pieces[index]
            separator = pieces[index + 1] if index + 1 < len(pieces) else ""
            folded = _fold(piece).strip()
            backward = _has("complement", folded) or (_has("conditional", folded) and merged)
            if backward and merged and not carry:
                merged[-1] += piece + separator
            elif _has("conditional", folded) or (len(piece) < 80 and _is_glue(piece)):
                carry += piece + separator
            else:
                merged.append(carry + piece + separator)
                carry = ""
        if carry and merged:
            merged[-1] += carry
        elif carry:
            merged.append(carry)
        clauses.extend(clause.strip(" ,:;、，：-–—") for clause in merged)
    return [clause for clause in clauses if clause]


def _memory(clause: str) -> str:
    """``clause`` trimmed to its standing part, starting with a capital where there are any."""
    text = clause.strip(_PUNCT)
    reason = _pattern("reason")
    changed = True
    while changed:
        changed = False
        match = reason.search(_fold(text), 1)
        options = [_cut(text, "start", once=True), _cut(text, "end", once=True)]
        if match:
            options.append(text[: match.start()].strip(_PUNCT))
        for option in options:
            if option and option != text and _standing(option):
                text, changed = option, True
                break
    if len(text) > 1 and text[0] + text[-1] in _QUOTES:
        text = text[1:-1].strip()
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS].rsplit(" ", 1)[0]
    first = text[:1].upper()
    return (first if len(first) == 1 else text[:1]) + text[1:]


def standing_preference(text: str) -> str | None:
    """The memory a comment, correction or follow-up proposes, or None."""
    prepared = unicodedata.normalize("NFC", text or "").translate({0x2019: "'", 0x2018: "'"})
    prepared = re.sub(r"[ \t\r\f\v]+", " ", prepared).strip()
    if not prepared or holds_secret(prepared):
        return None
    for clause in _clauses(prepared[:MAX_TEXT]):
        if len(clause) <= MAX_CLAUSE and _standing(clause):
            memory = _memory(clause)
            if memory:
                return memory
    return None
