"""The keyword lists of the default rules, written before any model was scored and never tuned to the data.

They stand for what guards in serving stacks do today: a deny-list of phrases, matched as whole words in any case.
Only the number of matches needed to act is tuned, on the train side.
"""

# Instruction-override and jailbreak phrases, the kind prompt-injection filters ship.
INJECTION_KEYWORDS = (
    "ignore previous", "ignore all previous", "ignore the above", "ignore your instructions", "ignore all instructions",
    "previous instructions", "disregard", "forget your instructions", "forget everything", "system prompt",
    "new instructions", "override", "you are now", "act as", "pretend to be", "roleplay", "developer mode",
    "jailbreak", "jailbroken", "DAN", "do anything now", "no restrictions", "without restrictions", "unfiltered",
    "uncensored", "bypass", "reveal your",
)  # fmt: skip

# Words of a moderation deny-list.
HARM_KEYWORDS = (
    "kill", "murder", "bomb", "explosive", "explosives", "weapon", "weapons", "gun", "guns", "poison", "drug", "drugs",
    "meth", "cocaine", "heroin", "hack", "hacking", "malware", "virus", "ransomware", "steal", "theft", "fraud",
    "scam", "launder", "terrorist", "terrorism", "suicide", "self-harm", "abuse", "violence", "racist", "illegal",
    "counterfeit", "phishing", "exploit", "attack", "hate", "torture", "kidnap", "trafficking", "porn", "nude",
)  # fmt: skip

# Operations an agent deny-list blocks: destructive, money-moving, publishing, credential and shell actions.
AGENT_DENYLIST = (
    "delete", "remove", "drop", "destroy", "wipe", "format", "shutdown", "kill", "transfer", "payment", "pay",
    "withdraw", "wire", "purchase", "buy", "send", "email", "post", "publish", "share", "upload", "password",
    "credential", "credentials", "token", "secret", "ssn", "exec", "execute", "shell", "sudo", "rm", "chmod",
    "disable", "bypass",
)  # fmt: skip
