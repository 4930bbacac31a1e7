"""The notice relay's shared protocol (ADR-0048 D2–D5, D7; ADR-0052), one concept per module.

    runner_name   the name a runner stamps into LeasedBy (`api|function|verb/{host}/{pid}/{hex}`)
    claim_sql     the one set-based claim UPDATE, one function per dialect (docs/database.md)
    claim         NoticeClaim: renew, claim, re-read by name, mark with DeliveredAt as the token
    evidence      ADR-0052: the exact question, or the weaker one, and the finding's wording
    address       whether a user's Email can be a notice's To
    render        the RFC 5322 message (standard library `email`)
    transports    NoticeTransport: the pickup directory and the blob container
    outcomes      what a delivery returns (values, never the address)
    delivery      NoticeDeliveryRun: address → evidence → render → transport → mark
    sweep         NoticeSweep and NoticeSweepSummary
    hosted        HostedRelay: the one hosted runner (the API's loop and the Function alike)
    relay_loop    NoticeRelayService: the API's periodic timer around a HostedRelay (D1)
    notify        the verb's protocol (D5): drain, release at exit, the exit decision
    status        owed rows, their holders and the oldest owed row's age

Every runner (the timer Function, the API's loop, the verb) calls exactly this code.
Loggers are named `azurebank.notices.*`.
"""
