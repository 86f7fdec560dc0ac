"""The lexicon of ``proposals.standing_preference``, one block per language: lines of ``field
cue; cue``, an indented line going on with the one above (joined without a space). A cue is a
regular expression on accent-folded text (``é`` as ``e``), matched case-blind and as whole words;
``{NAME}`` is a name, ``{CAP}`` a capitalised word. Fields: ``fact``, ``setting`` (propose alone);
``lasting`` (``from now on``), ``always`` (beside a ``directive`` or ``request``); ``question``,
``subject`` (a remark, unless a ``modal`` follows), ``one_off``, ``complaint``, ``idiom`` (propose
nothing); ``filler``, ``trailer`` (trimmed off), ``reason`` (ends the memory), ``conditional`` and
``complement`` (read with the neighbouring clause).
"""

EN = r"""
lasting from now on; from here on(?: out| in)?; going forward; moving forward; henceforth;
  in future; for future reference; from this point (?:on|forward);
  (?:for|in) (?:all )?(?:of )?(?:your )?(?:future )?(?:answers|responses|replies|chats);
  (?:in |for )?(?:every|each) (?:single )?(?:answer|response|reply); by default;
  (?:remember|keep in mind|bear in mind|don't forget|note|assume)(?: that)? (?:i|i'm|my|we|we're)\b
always always; never; in general; generally; usually; normally; every time; each time; all the time;
  whenever; in the future; no more; anymore; next time;
  (?:when|whenever|if|every time) (?:i|we) (?:ask|say|write|type|request|need|want|mention)\b;
  (?<!the )(?<!these )(?<!those )(?:your )?(?:answers|responses|replies)
directive you (?:should|must|need to|have to); make sure; try to; remember to; don't;
  i (?:want|need|prefer|like); i'd (?:like|prefer|rather); i would (?:like|prefer); answer; reply;
  respond; use; write; give; keep; be; talk; speak; call; address; include; add; put; show; explain;
  format; avoid; skip; stop; start; end; mention; cite; tell; list; convert; make; apologi[sz]e;
  say; ask; check; double-check; summari[sz]e; translate; correct; let me know
request please; pls; plz; kindly; (?:can|could|would|will) (?:you|u)(?: please)?; would you mind;
  is it possible to; i(?:'d| would) like you to; i (?:want|need) you to
modal should; must; need to; have to; ought to; shall
subject ^(?:you|u|it|it's|its|this|that|that's|these|those|he|she|they|there|there's)(?!\w);
  ^i(?:'ll| will| was| had|'ve| did)(?!\w); ^i (?:always|never|usually|often|sometimes) (?!(?:want|
  need|prefer|like|love|use|write|code|program|work|eat|drink|speak|cook)\b)
question ^(?:do|does|did|is|are|was|were|am|have|has|had|can i|should i|what|why|how|where|who|
  which|whose|isn't|aren't|don't you|doesn't|didn't)(?!\w)
fact call me {NAME}; my name(?:'s| is) {NAME}; name's {NAME}; (?:address|refer to) me as;
  my pronouns are; i go by {NAME}; i(?:'m| am) called {NAME}; i(?:'m| am) (?!(?:sorry|fine|ok|okay|
  good|sure|done|back|here|ready|lost|not|glad|happy|tired)\b){CAP}\s*$; (?:i|we)(?:'m| am|
  're| are)(?: (?:a|an|strictly|strict|fully|mostly|also|both))* (?:vegetarians?|vegans?|
  pesc[ae]tarians?|halal|kosher|co?eliac|diabetic|(?:lactose|gluten)[- ]intolerant|gluten[- ]free|
  allergic|teetotal|keto|paleo|on an? [\w-]+ diet)\b; (?:i|we) (?:don't|do not|never|can't|cannot|
  won't) (?:eat|drink|touch)(?: any)? (?:meat|pork|beef|fish|seafood|shellfish|dairy|gluten|eggs?|
  nuts|peanuts|alcohol|animal products|sugar|chicken|lamb|red meat)\b; i (?:have|'ve got) (?:a |
  an )?(?:\w+ )?(?:allergy|intolerance|co?eliac|diabetes|adhd|dyslexia|autism)\b;
  i follow an? \w+ diet; my (?:\w+ )?(?:is|are) (?:vegetarian|vegan|allergic)\b;
  i(?: live| reside|'ve lived| have lived) in; i(?:'m| am) (?:based|located|living|settled) in;
  i come from; (?:i(?:'m| am)|we(?:'re| are)) (?:from|in) (?:the )?{CAP}; we live in;
  i moved to {CAP}; my (?:home )?(?:country|city|town|hometown|time ?zone|timezone|location) is;
  i (?:mostly |mainly |usually |only |primarily |normally |always |just |generally )?(?:use|write|
  code in|program in|develop in|work in|work with) (?!(?:it|this|that|these|those|them|you|your|to|
  the (?:first|second|last|same|other|previous|above))\b)\w+;
  i(?:'m| am) (?:using|coding in|programming in|working with) (?!(?:it|this|that|the|a)\b)\w+;
  my (?:main |primary |preferred |favou?rite |usual )?(?:programming language|language|stack|editor|
  ide|os|operating system|framework|setup|shell) is; i(?:'m| am) (?:a |an )(?:\w+ ){0,2}(?:beginner|
  novice|newbie|expert|professional|student|teacher|doctor|nurse|engineer|developer|dev|programmer|
  designer|lawyer|researcher|scientist|analyst|manager|writer|parent|retiree|user|speaker)\b;
  i(?:'m| am) (?:a )?(?:complete |total |absolute )?(?:beginner|novice|newbie|noob|expert|
  intermediate|advanced)\b; i work (?:as|at|for)\b; i work in (?!(?:a|the|my|this|that)\b)\w+;
  i(?:'m| am) (?:new to|fluent in|self-employed|retired|colou?r ?blind|dyslexic|deaf|blind|
  left-handed|a native \w+ speaker|non-technical|not (?:a |an )?(?:programmer|developer|coder|
  native speaker|native english speaker|expert|techie|technical|engineer))\b;
  i(?:'m| am) (?:learning|studying|teaching) (?!(?:a lot|so much|something|that|this|it)\b)\w+;
  i (?:teach|study|learn) (?!(?:a lot|so much|something|that|this|it)\b)\w+;
  i have (?:\d+|\w+) years? (?:of )?experience; i(?:'m| am) \d{1,3}(?: years old| y/?o\b|\s*$);
  i (?:only |mainly |mostly )?speak (?!(?:to|with|about|of|for)\b)\w+;
  my (?:native|first|mother) (?:language|tongue) is;
  english is(?:n't| not) my (?:first|native) language; (?:i|we) use (?:the )?(?:metric|imperial)\b;
  i (?:generally |usually |always |really |much |strongly |definitely )?prefer (?!(?:not|this|that|
  it|these|those|yours|the (?:first|second|third|last|previous|other|former|latter|new|old|original|
  earlier|one|shorter|longer))\b)(?=\w);
  i (?:really )?(?:like|love|want|prefer) (?:my|it when|when|it if)\b; i (?:really )?(?:like|love|
  prefer|enjoy) (?:short|shorter|long|longer|brief|concise|detailed|simple|plain|direct|casual|
  formal|technical|step[- ]by[- ]step|bullet|answers|responses|replies|explanations|examples|code|
  tables|lists|sources)\b;
  i (?:hate|dislike|don't like|do not like|can't stand) (?:it )?(?:when|if)\b; (?:answers|responses|
  replies|explanations) (?:should|must) (?:always |never )?(?:be|use|include|have|stay|start|end)\b;
  i (?:code|program|develop) (?:mostly|mainly|only|usually) in
setting (?:use|stick to|stick with|switch to|go with|default to|work in|measure in|
  give (?:me )?(?:everything|all|measurements|temperatures|distances|weights|prices|units|
  quantities) in) (?:the )?(?:metric|imperial|si|celsius|fahrenheit|centigrade|kilomet(?:er|re)s|km|
  miles|kilograms|kg|pounds|lbs|grams|ounces|(?:british|american|uk|us) (?:english|spelling)|
  oxford comma|24[- ]?h(?:our)?|12[- ]?h(?:our)?|iso|euros?|dollars?|gbp|usd|eur)\b
one_off this (?:one|answer|response|reply|time|version|text|list|code|recipe|table|part|email|draft|
  example|question|chat|week|weekend|morning|evening|trip)\b;
  that (?:one|answer|response|reply|version|part|list|table|recipe|code|draft|example)\b;
  (?:the )?(?:last|previous|above|earlier|first|second|other) (?:one|answer|response|reply|version|
  option|example|draft)\b; just (?:this|that|once); for (?:this|that|now|today|the moment);
  (?:right|just) now; today; tonight; tomorrow; at the moment; temporarily; redo;
  rewrite (?:it|this|that); try again; once more; one more time
complaint (?:that|this|it|which|the answer|your answer)(?:'s| is| was| were| are)(?: \w+)? (?:wrong|
  incorrect|false|bad|useless|terrible|awful|nonsense|garbage|rubbish|broken|off|not right|
  not correct|not true)\b; you(?:'re| are| were) (?:\w+ )?wrong; you (?:got|get|have) \w+ wrong;
  (?:doesn't|does not|didn't|did not|won't) work; makes no sense; you keep; you kept;
  not what i (?:asked|wanted|meant); you (?:forgot|ignored|missed);
  (?:every time|each time|whenever) i \w+(?: \w+)*,? you (?!should|must|need|have to)
idiom as always; like always; as usual; never mind; nevermind; always a pleasure;
  better late than never; always helpful; always so
filler thanks; thank you(?: so much| very much)?; thx; ok; okay; oh; ah; and; also; but; so; well;
  btw; by the way; actually; hey; hi; hello; great(?=[,.!]); cool(?=[,.!]); perfect(?=[,.!]);
  nice(?=[,.!]); good(?=[,.!]); awesome(?=[,.!]); yes(?=[,.!]); yeah; no(?=[,.!]); just;
  one more thing; fyi; just so you know; note that; remember to; remember(?: that)?;
  keep in mind(?: that)?; don't forget(?: that)?; make sure(?: that)?(?: you| to)?; since; because
trailer thanks; thank you; thx; ok; okay; if you (?:can|could|would|don't mind); in the future
reason (?:because|since|as|so(?: that)?|'?cause) (?=(?:i|i'm|we|my|it|you|there)\b)
conditional ^(?:if|when|whenever|every time|each time|once|in case|unless)(?!\w)
"""

DE = r"""
lasting ab jetzt; ab sofort; von jetzt an; von nun an; ab heute; fortan; künftig; zukünftig;
  in zukunft; für die zukunft; standardmäßig;
  (?:in|bei) (?:jeder|allen) (?:deiner |deinen |ihrer |ihren )?antwort(?:en)?;
  (?:jede|alle) (?:deine |ihre )?antwort(?:en)?; merke? dir; merken sie sich;
  (?:denk|denke) daran,? dass (?:ich|mein|wir)\b
always immer; stets; nie; niemals; generell; grundsätzlich; im allgemeinen; jedes ?mal;
  normalerweise; nicht mehr; keine? \w+ mehr; wann immer; nächstes mal;
  (?:wenn|immer wenn) ich (?:frage|nach)\b; deine antworten
directive du (?:sollst|solltest|musst); ich möchte; ich will; ich hätte gerne?; ich brauche;
  ich bevorzuge; lass uns; antworte\w*; schreib\w*; benutz\w*; verwend\w*; nutze; gib; sei;
  halte\w*; erklär\w*; sprich; sprechen sie; nenn\w*; duz\w*; sieze\w*; füg\w*; zeig\w*;
  vermeide\w*; lass; verzichte\w*; mach\w*; formatiere\w*; nimm; bleib\w*; übersetze\w*; beginne\w*;
  frag\w*; erwähne\w*; korrigiere\w*
request bitte; (?:kannst|könntest|würdest) du(?: bitte)?; (?:können|könnten|würden) sie(?: bitte)?
modal sollst; solltest; sollte; sollten; musst; müssen; muss; sollen
subject ^(?:du|es|das|dies|dieses|diese|er|sie|man)(?!\w); ^ich (?:habe|hab|war|werde|weiß)(?!\w)
question ^(?:was|warum|wieso|weshalb|wie|wann|wo|woher|wohin|wer|welche\w*|ist|sind|hast|hat|
  bin ich)(?!\w)
fact nenn(?:e|t|en sie)? mich (?:bitte |einfach |doch )?{NAME}; ich hei(?:ss|ß)e {NAME};
  mein name ist {NAME}; sag (?:einfach )?{NAME} zu mir; (?:du kannst|sie können) mich {NAME} nennen;
  (?:duze|sieze) mich; mich (?:\w+ )?(?:duzen|siezen);
  (?:sprich|sprechen sie) mich (?:\w+ )*?mit (?:du|sie) an; ich bin (?:\w+ )?(?:vegetarier\w*|
  veganer\w*|vegan|vegetarisch|pescetarier\w*|allergisch|allergiker\w*|laktoseintolerant|
  glutenintolerant|diabetiker\w*)\b; ich (?:esse|trinke|vertrage) (?:kein\w*|nie\w*)\b;
  ich ernähre mich; ich lebe vegan; ich habe (?:eine )?\w*allergie;
  ich (?:wohne|lebe) (?:\w+ ){0,3}?(?:in|im|bei|auf)\b; wir (?:wohnen|leben) in; ich komme aus;
  ich bin aus (?:der |dem )?{CAP};
  ich (?:bin|sitze) in (?:der )?(?:{CAP}\w*(?:land|reich|ien|ei)|schweiz|usa)\b;
  ich (?:programmiere|entwickle|code|arbeite|schreibe) (?:\w+ )?(?:in|mit) (?!(?:dies\w*|das|der|
  dem|dir|ihnen)\b)\w+; ich (?:nutze|benutze|verwende) (?:meistens |hauptsächlich |immer |
  nur )?(?!(?:das|dies\w*|es|ihn|sie|den|die|deine\w*)\b)\w+; meine (?:programmier)?sprache ist;
  ich bin (?:ein\w* )?(?:\w+ )?(?:\w+-)?(?:anfänger\w*|einsteiger\w*|neuling|expert(?:e|in)|profi|
  student\w*|lehrer\w*|ärztin|arzt|ingenieur\w*|entwickler\w*|programmierer\w*|informatiker\w*|
  rentner\w*)\b; ich arbeite als; ich bin neu (?:in|bei|im)\b; ich lerne (?!(?:viel|dazu)\b)\w+;
  ich studiere; ich unterrichte; ich bin \d+ jahre alt;
  ich bin kein\w* (?:programmierer|entwickler|experte|muttersprachler)\w*;
  ich spreche (?:nur |fließend )?\w+; meine muttersprache ist; ich bin muttersprachler\w*;
  ich bevorzuge (?!(?:das|diese\w*|die erste|die zweite|die letzte)\b);
  mir (?:sind|ist) \w+ (?:\w+ )?lieber; ich mag (?:es,? wenn|kurze|knappe|lange|ausführliche|
  einfache|meine|antworten|erklärungen|beispiele|stichpunkte|tabellen)\b;
  ich (?:mag es nicht|hasse es),? wenn; antworten (?:sollen|sollten|müssen) (?:immer|nie)\b
setting (?:benutz|verwend|nutz|nimm|bleib)\w* .{0,25}(?:metrisch|celsius|fahrenheit|kilometer|km\b|
  meilen|britisch)
one_off diese antwort; dieses mal; diesmal; nur diese\w*; die letzte antwort; noch ?mal; nochmals;
  erneut; heute; im moment; momentan; vorerst; fürs erste; für jetzt; diese woche; gerade
complaint (?:das|es|dies) (?:ist|war) (?:\w+ )?(?:falsch|nicht richtig|schlecht|nutzlos|unsinn|
  quatsch)\b; du (?:liegst|hast) (?:\w+ )?(?:falsch|unrecht)\b; stimmt nicht; funktioniert nicht;
  ergibt keinen sinn
idiom wie immer; wie gewohnt; wie üblich; schon immer; immer gerne
filler danke(?: schön| sehr)?; vielen dank; übrigens; ach ja; ach; und; auch; außerdem; ok(?:ay)?;
  super; toll; also; ps; merke? dir(?:,? dass)?; denk daran(?:,? dass)?; weil; da; denn
trailer danke
reason (?:weil|da|denn) (?=(?:ich|wir|mein|meine|es|du)\b)
conditional ^(?:wenn|falls|sobald|immer wenn|jedes mal wenn)(?!\w)
complement ^(?:dass|daß)(?!\w)
"""

ES = r"""
lasting de ahora en adelante; a partir de (?:ahora|hoy); desde ahora; de aquí en adelante;
  en adelante; en lo sucesivo; para el futuro; por defecto;
  (?:en )?(?:cada|todas) (?:tus |las )?(?:futuras |próximas )?respuestas?;
  (?:recuerda|ten en cuenta) que (?:yo|soy|mi|me|vivo|no)\b
always siempre; nunca; jamás; en general; por lo general; generalmente; normalmente; cada vez;
  ya no; nunca más; en el futuro; la próxima vez;
  (?:cuando|siempre que|cada vez que) te (?:pida|pregunte)\b; tus respuestas
directive quiero que; me gustaría; prefiero que; deberías; debes; tienes que; necesito que;
  responde\w*; contesta\w*; usa; use; utiliza; utilice; escribe; escriba; dame; deme; da; sé; sea;
  habla; háblame; hable; explica\w*; explique; incluye; incluya; añade; agrega; evita; evite; pon;
  muestra; llámame; menciona; convierte; traduce; trátame; tutéame; corrige\w*; avísame;
  no (?:uses|utilices|respondas|escribas|pongas|incluyas|añadas|hables|digas|me llames)\b
request por favor; porfa; (?:me )?puedes; podrías; podría; puede
modal deberías; debes; tienes que; hay que; debe; debería; tiene que
subject ^(?:tú|usted|eso|esto|esta|este|él|ella|ellos|ellas)(?!\w)
question ^¿
fact llámame {NAME}; (?:me puedes|puedes|podés) llamar(?:me)? {NAME}; me llamo {NAME};
  mi nombre es {NAME}; (?:trátame|háblame) de (?:tú|usted); (?:soy|
  somos) (?:\w+ )?(?:vegetarian[oa]s?|vegan[oa]s?|celíac[oa]s?|alérgic[oa]s?|intolerante|
  diabétic[oa]s?)\b; no (?:como|comemos|tomo|bebo) (?:carne|cerdo|pescado|mariscos|lácteos|gluten|
  huevos?|alcohol|azúcar)\b; tengo (?:una )?alergia; (?:vivo|vivimos|resido) en; soy de {CAP};
  (?:estoy|estamos) en {CAP}; mi país es; (?:programo|desarrollo) en; (?:uso|utilizo|trabajo con|
  escribo en) (?:sobre todo |principalmente |siempre |solo )?(?!(?:esto|eso|esta|este|esa|ese|la|lo|
  de|el)\b)\w+; soy (?:una? )?(?:\w+ )?(?:principiante|novat[oa]|expert[oa]|estudiante|profesora?|
  médic[oa]|ingenier[oa]|desarrollador[a]?|programador[a]?|jubilad[oa])\b; trabajo (?:como|de)\b;
  soy nuev[oa] en; estoy aprendiendo; tengo \d+ años;
  no soy (?:programador|experto|hablante nativo)\w*; (?:solo )?hablo (?!(?:de|del|con|sobre)\b)\w+;
  mi (?:idioma|lengua) (?:materna|nativa) es; prefiero (?!(?:esta|este|esa|ese|esto|eso|la primera|
  la segunda|la última|la anterior|el primero)\b)(?=\w);
  (?:no )?me gustan? (?:que|cuando|las respuestas|respuestas)\b; las respuestas (?:deben|deberían)\b
setting (?:usa|use|utiliza|utilice|emplea)\w* .{0,25}(?:métric|celsius|fahrenheit|kilómetros|km\b|
  millas)
one_off esta respuesta; esa respuesta; esta vez; solo esta; solo esto; de nuevo; otra vez; hoy;
  ahora mismo; por ahora; por el momento; esta semana; la primera; la anterior; rehaz
complaint (?:eso|esto) (?:es|está) (?:\w+ )?(?:mal|incorrecto|equivocado|fatal)\b; te equivocas;
  te has equivocado; no funciona; no tiene sentido; estás equivocad[oa]
idiom como siempre; como de costumbre; de siempre; siempre es un placer; más vale tarde que nunca
filler gracias; muchas gracias; por cierto; ah; y; también; además; ok; vale; bueno; recuerda que;
  ten en cuenta que; porque; ya que; como; perfecto
trailer gracias
reason (?:porque|ya que|así que) (?=(?:yo|soy|estoy|vivo|mi|no|me|tengo)\b)
conditional ^(?:si|cuando|siempre que|cada vez que)(?!\w)
"""

FR = r"""
lasting à partir de maintenant; désormais; dorénavant; à l'avenir; pour l'avenir; par défaut;
  à partir d'aujourd'hui; pour la suite;
  (?:dans |pour )?(?:chaque|toutes (?:tes|vos|les)) (?:prochaines )?réponses?;
  (?:souviens-toi|retiens|n'oublie pas) que (?:je|j'|mon|ma|mes)
always toujours; jamais; plus jamais; en général; généralement; normalement; chaque fois;
  ne \w+ plus; n'\w+ plus; dans le futur; la prochaine fois;
  (?:quand|lorsque|si) je (?:te )?(?:demande|pose)\b; (?:tes|vos) réponses
directive je veux que; je voudrais que; j'aimerais que; je préfère que; je voudrais; j'aimerais;
  tu dois; tu devrais; vous devez; il faut; réponds; répondez; utilise; utilisez; emploie; écris;
  écrivez; donne; donnez; sois; soyez; parle; parlez; explique; expliquez; inclus; ajoute; ajoutez;
  évite; évitez; mets; mettez; montre; appelle-moi; appelez-moi; tutoie-moi; cite; convertis;
  traduis; fais; faites; n'utilise; n'utilisez; ne mets; corrige; indique; mentionne
request peux-tu; pouvez-vous; pourrais-tu; pourriez-vous; tu peux; vous pouvez; s'il te plaît;
  s'il vous plaît; stp; svp; merci de
modal dois; devrais; devez; devriez; faut
subject ^(?:tu|vous|il|elle|ils|elles|ça|c'est|cela|ceci|on)(?!\w)
question ^(?:est-ce|qu'est-ce|pourquoi|quel|quelle|quels|quelles|combien|comment)(?!\w)
fact appelle[- ]moi {NAME}; appelez[- ]moi {NAME}; je m'appelle {NAME}; mon (?:pré)?nom est {NAME};
  (?:tu peux|vous pouvez) m'appeler {NAME}; tutoie[- ]moi; vouvoie[- ]moi;
  je suis (?:\w+ )?(?:végétarien\w*|végétalien\w*|vegan\w*|végane|allergique|intolérant\w*|cœliaque|
  coeliaque|diabétique)\b; je ne (?:mange|bois) (?:pas|jamais|plus) (?:de |d')\w+;
  j'ai une allergie; j'habite (?:à|en|au|aux|dans|près)\b; je (?:vis|réside) (?:à|en|au|aux|dans)\b;
  je suis (?:basée?|installée?) (?:à|en|au)\b; je suis (?:à|en|au|de|du) {CAP};
  je viens (?:de |du |des |d')(?:la |l')?{CAP}; nous (?:habitons|vivons)\b;
  je (?:programme|code|développe) (?:surtout |principalement |toujours )?(?:en|avec)\b;
  j'utilise (?:surtout |principalement |toujours |seulement )?(?!(?:ça|ceci|cela|cette|ce|la|
  le)\b)\w+; je travaille (?:avec|en|sous) (?!(?:ça|toi|vous|ce)\b)\w+;
  je suis (?:une? )?(?:\w+ )?(?:débutante?|novice|experte?|étudiante?|professeur\w*|enseignante?|
  médecin|ingénieure?|développeu(?:r|se)\w*|retraitée?)\b; je travaille comme;
  je suis (?:nouveau|nouvelle) (?:en|dans)\b; j'apprends \w+; j'étudie \w+; j'ai \d+ ans;
  je ne suis pas (?:une? )?(?:programmeur|développeur|expert|informaticien)\w*;
  je parle (?:seulement |uniquement |surtout )?(?!(?:de|du|des|d'|avec)\b)\w+;
  ma langue maternelle est; je préfère (?!(?:celle|celui|cette|ce|ça|la première|la deuxième|
  la dernière|l'autre|la version)\b)(?=\w); j'aime (?:quand|que|les réponses|les explications)\b;
  je n'aime pas (?:quand|que)\b; les réponses doivent\b
setting (?:utilise|utilisez|emploie|employez|passe|passez)\w* .{0,25}(?:métrique|celsius|fahrenheit|
  kilomètres|km\b|miles)
one_off cette réponse; cette fois(?:-ci)?; juste ça; refais; encore une fois; de nouveau;
  aujourd'hui; pour l'instant; pour le moment; en ce moment; cette semaine; la première;
  la deuxième; la dernière; celle-ci; celle-là; celui-ci
complaint (?:c'est|c'était|ça c'est) (?:\w+ )?(?:faux|incorrect|nul|mauvais|n'importe quoi|inutile|
  pas bon|pas juste)\b; tu te trompes; vous vous trompez; ça ne (?:marche|fonctionne) pas;
  aucun sens; tu as tort; tu oublies
idiom comme toujours; comme d'habitude; comme d'hab; toujours un plaisir; toujours aussi
filler merci(?: beaucoup| bien)?; au fait; ah; et; aussi; ok; d'accord; bon; alors; ps;
  souviens-toi que; retiens que; n'oublie pas que; parce que; car; puisque; comme; super; parfait
trailer merci
reason (?:parce que|car|puisque|vu que|donc) (?=(?:je|j'|nous|mon|ma|mes|c'est)\b)
conditional ^(?:si|quand|lorsque|chaque fois que|dès que)(?!\w)
complement ^que(?!\w)
"""

PT = r"""
lasting de agora em diante; a partir de (?:agora|hoje); daqui (?:para|pra) frente; daqui em diante;
  de hoje em diante; por padrão; por defeito; para o futuro;
  (?:em |para )?(?:todas as|cada|toda) (?:suas |tuas )?(?:próximas )?respostas?;
  (?:lembre-se de|lembre-se|lembra|lembre|não esqueça) que (?:eu|sou|meu|minha|moro|não)\b
always sempre; nunca; jamais; em geral; geralmente; normalmente; toda vez; cada vez; nunca mais;
  não \w+ mais; no futuro; da próxima vez;
  (?:quando|sempre que|toda vez que) eu (?:pedir|perguntar)\b; (?:suas|tuas) respostas
directive quero que; gostaria que; prefiro que; gostaria; você deve; deves; deveria; tem que;
  responda; responde; use; usa; utilize; utiliza; escreva; escreve; dê; me dê; seja; fale; fala;
  explique; explica; inclua; adicione; acrescente; evite; evita; coloque; ponha; mostre; me chame;
  chame-me; chama-me; me chama; converta; traduza;
  não (?:use|usa|coloque|inclua|escreva|fale|me chame|responda)\b; corrija; avise
request por favor; pfv; (?:você )?pode; podes; poderia; consegue; seria possível
modal deve; deves; deveria; tem que; tens que; precisa
subject ^(?:você|tu|isso|isto|ele|ela|eles|elas)(?!\w)
fact me cham[ae] de {NAME}; cham[ae]-me {NAME}; pode(?:s)? me chamar de {NAME}; me chamo {NAME};
  (?:o )?meu nome é {NAME}; chamo-me {NAME}; (?:sou|somos) (?:\w+ )?(?:vegetarian[oa]s?|vegan[oa]s?|
  celíac[oa]s?|alérgic[oa]s?|intolerante|diabétic[oa]s?)\b; (?:eu )?não (?:como|bebo) (?:carne|
  porco|peixe|frutos do mar|laticínios|glúten|ovos?|álcool|açúcar)\b; tenho alergia;
  (?:moro|vivo|moramos|vivemos|resido) (?:em|no|na|nos|nas)\b; sou (?:de|do|da) {CAP};
  estou (?:em|no|na) {CAP}; meu país é; (?:programo|desenvolvo) (?:em|com)\b; (?:uso|utilizo|
  trabalho com|escrevo em) (?:principalmente |sempre |só )?(?!(?:isso|isto|esse|essa|este|esta|o|a|
  de)\b)\w+; sou (?:uma? )?(?:\w+ )?(?:iniciante|novat[oa]|especialista|estudante|professora?|
  médic[oa]|engenheir[oa]|desenvolvedora?|programadora?|aposentad[oa])\b; trabalho como;
  sou nov[oa] (?:em|no|na)\b; estou (?:aprendendo|a aprender)\b; tenho \d+ anos;
  não sou (?:programador|especialista)\w*; (?:só )?falo (?!(?:de|do|da|sobre|com)\b)\w+;
  minha língua (?:materna|nativa) é; prefiro (?!(?:esta|essa|este|esse|isso|isto|a primeira|
  a segunda|o primeiro|a última|a anterior)\b)(?=\w);
  (?:não )?gosto (?:de respostas|das respostas|quando|que)\b; as respostas devem\b
setting (?:use|usa|utilize|utiliza)\w* .{0,25}(?:métric|celsius|fahrenheit|quilômetros|km\b|milhas)
one_off esta resposta; essa resposta; desta vez; dessa vez; só essa; de novo; novamente; hoje;
  agora mesmo; por enquanto; por agora; esta semana; a primeira; a anterior; refaça
complaint (?:isso|isto) (?:é|está) (?:\w+ )?(?:errado|incorreto|ruim|péssimo|inútil)\b; você errou;
  você está errad[oa]; não funciona; não faz sentido
idiom como sempre; como de costume; de sempre; sempre um prazer; antes tarde do que nunca
filler obrigad[oa]; muito obrigad[oa]; valeu; aliás; ah; e; também; ok; tá; bom; então; a propósito;
  (?:lembre-se de|lembre-se|lembra|lembre|não esqueça) que; porque; pois; como; perfeito
trailer obrigad[oa]; valeu
reason (?:porque|pois|já que) (?=(?:eu|sou|estou|moro|meu|minha|não|tenho)\b)
conditional ^(?:se|quando|sempre que|toda vez que)(?!\w)
"""

IT = r"""
lasting d'ora in (?:poi|avanti); da (?:ora|adesso|oggi) in (?:poi|avanti); d'ora innanzi;
  da qui in avanti; per il futuro; di default; per impostazione predefinita;
  (?:in |per )?(?:ogni|tutte le) (?:tue )?(?:prossime )?rispost[ae]; (?:ricorda(?:ti)?|
  tieni (?:a mente|presente)|non dimenticare) che (?:io|sono|mi|il mio|la mia|vivo|non)\b
always sempre; mai; in generale; generalmente; normalmente; ogni volta; mai più; non \w+ più;
  in futuro; la prossima volta; (?:quando|ogni volta che|se) ti (?:chiedo|scrivo)\b; le tue risposte
directive voglio che; vorrei che; preferisco che; vorrei; devi; dovresti; rispondi\w*; risponda;
  usa; usi; utilizza; utilizzi; scrivi; scriva; dai; dammi; sii; sia; parla\w*; spiega\w*; includi;
  aggiungi; evita; metti; mostra; chiamami; mi chiami; converti; traduci;
  non (?:usare|mettere|scrivere|includere|rispondere|parlare|dire|aggiungere)\b; correggi\w*;
  avvisami; indica; riassumi
request per favore; per piacere; puoi; potresti; può; potrebbe
modal devi; dovresti; deve; dovrebbe; bisogna
subject ^(?:tu|lei|questo|questa|quello|ciò|lui|loro)(?!\w)
fact chiamami {NAME}; mi chiamo {NAME}; il mio nome è {NAME}; puoi chiamarmi {NAME};
  dammi (?:pure )?del (?:tu|lei)\b;
  sono (?:\w+ )?(?:vegetarian[oa]|vegan[oa]|celiac[oa]|allergic[oa]|intollerante|diabetic[oa])\b;
  non (?:mangio|bevo) (?:carne|maiale|pesce|latticini|glutine|uova|alcol|zucchero)\b;
  ho un'allergia; (?:vivo|abito|viviamo|abitiamo|risiedo) (?:a|in|nel|nella|negli)\b;
  sono (?:di|del|della|a|in) {CAP}; vengo (?:da|dal|dalla) {CAP}; il mio paese è;
  (?:programmo|sviluppo) (?:in|con)\b; (?:uso|utilizzo|lavoro con|scrivo in) (?:soprattutto |
  principalmente |sempre |solo )?(?!(?:questo|questa|quello|quella|la|il|lo)\b)\w+; sono (?:un |
  una |un')?(?:\w+ )?(?:principiante|alle prime armi|espert[oa]|student(?:e|essa)|insegnante|medico|
  ingegnere|sviluppat(?:ore|rice)|programmat(?:ore|rice)|pensionat[oa])\b; lavoro come;
  sono nuov[oa] (?:in|di|nel|nella|a)\b; sto (?:imparando|studiando)\b; ho \d+ anni;
  non sono (?:un )?(?:programmatore|esperto|sviluppatore)\b;
  parlo (?:solo )?(?!(?:di|del|della|con)\b)\w+; (?:la mia lingua madre è|sono madrelingua);
  preferisco (?!(?:questa|questo|quella|quello|la prima|la seconda|il primo|l'ultima)\b)(?=\w);
  (?:non )?mi piace (?:quando|che)\b; mi piacciono (?:le risposte|risposte)\b; le risposte devono\b
setting (?:usa|usi|utilizza|utilizzi|adotta)\w* .{0,25}(?:metric|celsius|fahrenheit|chilometri|km\b|
  miglia)
one_off questa risposta; questa volta; stavolta; solo questa; solo questo; di nuovo;
  ancora una volta; oggi; per ora; per il momento; questa settimana; la prima; la precedente;
  rifa(?:i|llo)
complaint (?:questo|ciò|è) (?:è )?(?:\w+ )?(?:sbagliat[oa]|errat[oa]|inutile|falso)\b; hai torto;
  ti sbagli; sbagli sempre; non funziona; non ha senso
idiom come sempre; come al solito; di sempre; sempre un piacere; meglio tardi che mai; sempre così
filler grazie(?: mille)?; a proposito; ah; e; anche; inoltre; ok; va bene; bene; allora; comunque;
  (?:ricorda(?:ti)?|tieni (?:a mente|presente)|non dimenticare) che; perché; poiché; siccome;
  dato che
trailer grazie(?: mille)?
reason (?:perché|poiché|dato che|quindi) (?=(?:io|sono|vivo|mio|mia|non|ho)\b)
conditional ^(?:se|quando|ogni volta che)(?!\w)
complement ^che(?!\w)
"""

RU = r"""
lasting с этого момента; с этих пор; отныне; впредь; в дальнейшем; с сегодняшнего дня; на будущее;
  теперь всегда; по умолчанию; в каждом ответе; во всех (?:своих |твоих )?(?:будущих )?ответах;
  (?:каждый|все) (?:твои |свои )?ответы?;
  (?:запомни|запомните|имей в виду|учти|не забывай),? что (?:я|мне|меня|мой|моя|мы)\b
always всегда; никогда; постоянно; обычно; в целом; как правило; каждый раз; больше не; в будущем;
  в следующий раз; (?:когда|если) я (?:спрашиваю|прошу|спрошу|попрошу)\b; (?:твои|свои) ответы
directive я хочу,? чтобы; хочу,? чтобы; я бы хотел\w*; мне нужно; ты должен; тебе стоит; давай;
  отвечай(?:те)?; ответь(?:те)?; используй(?:те)?; пиши(?:те)?; напиши(?:те)?; дай(?:те)?;
  давай(?:те)?; будь(?:те)?; говори(?:те)?; объясняй(?:те)?; объясни(?:те)?; добавляй(?:те)?;
  добавь(?:те)?; избегай(?:те)?; ставь(?:те)?; показывай(?:те)?; называй(?:те)?; зови(?:те)?;
  обращайся; обращайтесь; указывай(?:те)?; переводи(?:те)?; исправляй(?:те)?; делай(?:те)?;
  не (?:используй|пиши|ставь|добавляй|употребляй|говори|называй|упоминай|извиняйся)(?:те)?
request пожалуйста; можешь; можете; мог(?:ла|ли)? бы; не мог(?:ла|ли)? бы
modal должен; должна; должны; стоит; следует; нужно; надо
subject ^(?:ты|вы|это|он|она|они|оно)(?!\w); ^я (?:был|была|уже)(?!\w)
question ^(?:почему|зачем|что|где|кто|сколько|какой|какая|какие|разве)(?!\w); \bли\b
fact (?:зови|называй|называйте|зовите) меня {NAME}; меня зовут {NAME}; мое имя {NAME};
  обращайся ко мне; (?:можешь|можно) (?:звать|называть) меня; давай на ты;
  я (?:\w+ )?(?:вегетарианец|вегетарианка|веган|веганка|аллергик|диабетик)\b;
  у меня (?:\w+ )?(?:аллергия|непереносимость|диабет|целиакия)\b;
  я не (?:ем|пью|употребляю) (?:мясо|мяса|свинину|рыбу|молочн\w*|глютен|алкоголь|сахар)\b;
  я (?:соблюдаю|придерживаюсь)\b; я (?:живу|проживаю|нахожусь) (?:в|во|на)\b; мы живем в;
  я (?:из|родом из) {CAP}; я в {CAP}; моя страна; я (?:пишу|программирую|разрабатываю) (?:на|в)\b;
  я (?:использую|работаю с|пользуюсь) (?!(?:это|этим|этот|эту)\b)\w+; я (?:\w+ )?(?:новичок|
  начинающ(?:ий|ая)|эксперт|студент(?:ка)?|учитель\w*|преподаватель|врач|инженер|разработчик|
  программист|пенсионер\w*|школьни(?:к|ца))\b; я работаю (?:как|в|на|кем)\b; я (?:учу|изучаю)\b;
  мне \d+ (?:лет|год)\b; я говорю (?:только )?(?:на|по-)\b; мой родной язык;
  я предпочитаю (?!(?:этот|эту|это|первый|первую|второй|вторую)\b); мне (?:не )?нравится,? когда;
  мне нравятся (?:короткие|краткие|подробные|простые|ответы|примеры|таблицы|списки)\b;
  ответы должны\b
setting (?:используй|используйте|пиши|указывай|давай)\w* .{0,25}(?:метрическ|цельси|фаренгейт|
  километр|км\b)
one_off этот ответ; в этот раз; на этот раз; только этот; еще раз; снова; переделай; сегодня;
  сейчас; пока что; на данный момент; на этой неделе
complaint (?:это|ответ) (?:\w+ )?(?:неправильно|неверно|неправильный|неверный|ошибка|бред|чушь|
  плохо|бесполезно)\b; ты (?:\w+ )?ошибаешься; ты не прав\w*; не работает; не имеет смысла
idiom как всегда; как обычно; как и всегда; всегда пожалуйста; лучше поздно; всегда рад\w*
filler спасибо(?: большое)?; большое спасибо; кстати; ах; и; а; также; еще; ок; окей; хорошо; ладно;
  ну; (?:запомни|запомните|имей в виду|учти|не забывай),? что; запомни; потому что; так как;
  поскольку
trailer спасибо
reason (?:потому что|так как|поскольку|ведь) (?=(?:я|мне|меня|мой|моя|мы)\b)
conditional ^(?:если|когда|каждый раз когда)(?!\w)
complement ^(?:чтобы|что)(?!\w)
"""
